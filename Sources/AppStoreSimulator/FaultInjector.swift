import Foundation
import Synchronization

/// Which requests a fault applies to: both environments, or one path prefix.
public enum FaultScope: String, Sendable, CaseIterable {
    case all, production, sandbox
}

/// How verifyReceipt answers an injected failure.
public enum VerifyReceiptFailure: Sendable, Equatable {
    /// HTTP 200 with this status (21005, 21009, 21100…21199; the latter carry `"is-retryable": true`).
    case status(Int)
    /// HTTP 503 with an empty body.
    case http503
}

/// Injected misbehaviour of one scope. Counters ("next N") are consumed by matching requests.
public struct FaultSettings: Sendable, Equatable {
    /// Added before every answer.
    public var latencyMilliseconds: Int = 0
    /// The next N requests fail (Server API: 500 + 5000001; verifyReceipt: `verifyReceiptFailure`).
    public var failNext: Int = 0
    /// Each request also fails with this probability, drawn from a seeded generator.
    public var failureRate: Double = 0
    public var seed: UInt64 = 1
    public var verifyReceiptFailure: VerifyReceiptFailure = .status(21005)
    /// The next N requests answer 429 with `Retry-After` (Server API: 4290000).
    public var rateLimitNext: Int = 0
    public var retryAfterSeconds: Int = 1
    /// The next N requests are held this long before a 503: a client with a shorter timeout sees a hang.
    public var hangNext: Int = 0
    public var hangMilliseconds: Int = 30_000
}

/// What the injector has seen: every request to Apple's surface and the ones it made fail
/// (5xx, 429 or a hang), so a test can count a client's attempts.
public struct FaultCounts: Sendable, Equatable {
    public var requests = 0
    public var faulted = 0

    public static func - (a: FaultCounts, b: FaultCounts) -> FaultCounts {
        var d = FaultCounts(); d.requests = a.requests - b.requests; d.faulted = a.faulted - b.faulted; return d
    }
}

/// The decision for one request.
enum FaultAction: Equatable {
    case none
    case fail
    case rateLimit(retryAfter: Int)
    case hang(milliseconds: Int)
}

/// Fault settings per scope; thread-safe. A request consults the global scope, then its own.
public final class FaultInjector: Sendable {
    private struct State {
        var settings: [FaultScope: FaultSettings] = [:]
        var rng: [FaultScope: UInt64] = [:]
        var counts = FaultCounts()
    }
    private let state = Mutex(State())

    public func settings(for scope: FaultScope = .all) -> FaultSettings {
        state.withLock { $0.settings[scope] ?? FaultSettings() }
    }

    public func set(_ settings: FaultSettings, for scope: FaultScope = .all) {
        state.withLock { s in
            s.settings[scope] = settings
            s.rng[scope] = settings.seed
        }
    }

    public func update(_ scope: FaultScope = .all, _ change: (inout FaultSettings) -> Void) {
        state.withLock { s in
            var current = s.settings[scope] ?? FaultSettings()
            let oldSeed = current.seed
            change(&current)
            s.settings[scope] = current
            if s.rng[scope] == nil || oldSeed != current.seed { s.rng[scope] = current.seed }
        }
    }

    public func failNext(_ count: Int, scope: FaultScope = .all) { update(scope) { $0.failNext = count } }
    public func rateLimitNext(_ count: Int, retryAfterSeconds: Int = 1, scope: FaultScope = .all) {
        update(scope) { $0.rateLimitNext = count; $0.retryAfterSeconds = retryAfterSeconds }
    }
    public func hangNext(_ count: Int, milliseconds: Int, scope: FaultScope = .all) {
        update(scope) { $0.hangNext = count; $0.hangMilliseconds = milliseconds }
    }
    public func setLatency(milliseconds: Int, scope: FaultScope = .all) { update(scope) { $0.latencyMilliseconds = milliseconds } }
    public func setFailureRate(_ rate: Double, seed: UInt64 = 1, scope: FaultScope = .all) {
        update(scope) { $0.failureRate = rate; $0.seed = seed }
        state.withLock { $0.rng[scope] = seed }
    }
    public func setVerifyReceiptFailure(_ failure: VerifyReceiptFailure, scope: FaultScope = .all) {
        update(scope) { $0.verifyReceiptFailure = failure }
    }
    /// Clears every setting; the counts keep running (a test reads differences).
    public func reset() { state.withLock { $0 = State(counts: $0.counts) } }

    /// Requests on Apple's surface so far, and how many of them were given an injected fault.
    public var counts: FaultCounts { state.withLock { $0.counts } }

    /// Consumes counters and returns (latency, action, verifyReceipt failure style) for a request in `scope`.
    func decide(for scope: FaultScope) -> (latency: Int, action: FaultAction, receiptFailure: VerifyReceiptFailure) {
        state.withLock { s in
            var latency = 0
            var action = FaultAction.none
            var receiptFailure = VerifyReceiptFailure.status(21005)
            let scopes: [FaultScope] = scope == .all ? [.all] : [.all, scope]
            for candidate in scopes {
                guard var f = s.settings[candidate] else { continue }
                latency += f.latencyMilliseconds
                if action == .none {
                    if f.hangNext > 0 {
                        f.hangNext -= 1; action = .hang(milliseconds: f.hangMilliseconds)
                    } else if f.rateLimitNext > 0 {
                        f.rateLimitNext -= 1; action = .rateLimit(retryAfter: f.retryAfterSeconds)
                    } else if f.failNext > 0 {
                        f.failNext -= 1; action = .fail
                    } else if f.failureRate > 0 {
                        var x = s.rng[candidate] ?? f.seed
                        let draw = Self.splitMix(&x)
                        s.rng[candidate] = x
                        if Double(draw >> 11) / Double(1 << 53) < f.failureRate { action = .fail }
                    }
                    if action != .none { receiptFailure = f.verifyReceiptFailure }
                }
                s.settings[candidate] = f
            }
            s.counts.requests += 1
            if action != .none { s.counts.faulted += 1 }
            return (latency, action, receiptFailure)
        }
    }

    static func splitMix(_ state: inout UInt64) -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
