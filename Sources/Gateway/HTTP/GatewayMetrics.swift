import IAPCore
import Synchronization
import UpstreamHTTP

/// Counters and latency histograms for `/metrics` (Prometheus text format). Labels are route
/// names, status codes and error codes only: bounded sets, never ids or accounts.
public final class GatewayMetrics: Sendable {
    static let bucketsMicros: [UInt64] = [250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000]

    private struct Histogram {
        var buckets = [UInt64](repeating: 0, count: GatewayMetrics.bucketsMicros.count)
        var count: UInt64 = 0
        var sumMicros: UInt64 = 0

        mutating func observe(_ micros: UInt64) {
            for (i, bound) in GatewayMetrics.bucketsMicros.enumerated() where micros <= bound { buckets[i] += 1 }
            count += 1
            sumMicros += micros
        }

        func lines(_ name: String, _ labels: String) -> String {
            var out = ""
            for (i, bound) in GatewayMetrics.bucketsMicros.enumerated() {
                out += "\(name)_bucket{\(labels),le=\"\(Double(bound) / 1e6)\"} \(buckets[i])\n"
            }
            out += "\(name)_bucket{\(labels),le=\"+Inf\"} \(count)\n"
            out += "\(name)_sum{\(labels)} \(Double(sumMicros) / 1e6)\n"
            out += "\(name)_count{\(labels)} \(count)\n"
            return out
        }
    }

    private struct State {
        var requests: [String: UInt64] = [:]       // "route|status"
        var latency: [String: Histogram] = [:]     // route
        var refusals: [String: UInt64] = [:]       // error code
        var lostWrites: [String: UInt64] = [:]     // what was not written
        var upstreamCalls: [UpstreamKey: UInt64] = [:]
        var upstreamLatency: [UpstreamSeries: Histogram] = [:]
        var appleFailures: [AppleFailure: UInt64] = [:]
    }

    /// A verification Apple's answer failed, by app (a configured bundle id: bounded, and the
    /// same label value as the storage gauges give it) and why.
    private struct AppleFailure: Hashable, Comparable {
        let app: String
        let reason: String
        static func < (a: Self, b: Self) -> Bool { (a.app, a.reason) < (b.app, b.reason) }
    }

    /// Endpoint and environment: the labels of an upstream latency series.
    private struct UpstreamSeries: Hashable, Comparable {
        let endpoint: String
        let environment: String
        static func < (a: Self, b: Self) -> Bool { (a.endpoint, a.environment) < (b.endpoint, b.environment) }
        var labels: String { "endpoint=\"\(endpoint)\",environment=\"\(environment)\"" }
    }

    private struct UpstreamKey: Hashable, Comparable {
        let series: UpstreamSeries
        let outcome: String
        static func < (a: Self, b: Self) -> Bool { (a.series, a.outcome) < (b.series, b.outcome) }
    }

    private let state = Mutex(State())

    public init() {}

    func record(route: String, status: Int, micros: UInt64) {
        state.withLock { s in
            s.requests["\(route)|\(status)", default: 0] += 1
            s.latency[route, default: Histogram()].observe(micros)
        }
    }

    func recordUpstream(_ label: UpstreamCallLabel, outcome: String, micros: UInt64) {
        let series = UpstreamSeries(endpoint: Self.labelValue(label.endpoint), environment: Self.labelValue(label.environment))
        state.withLock { s in
            s.upstreamCalls[UpstreamKey(series: series, outcome: outcome), default: 0] += 1
            s.upstreamLatency[series, default: Histogram()].observe(micros)
        }
    }

    /// Label values come from code constants; anything else is cut down to a safe name rather than
    /// trusted, so a future caller cannot break the exposition format or leak a URL through it.
    static func labelValue(_ text: String) -> String {
        let safe = text.unicodeScalars.prefix(64).map { scalar -> Character in
            let allowed = scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)) || scalar == "_"
            return allowed ? Character(scalar) : "_"
        }
        return safe.isEmpty ? "unknown" : String(safe)
    }

    func recordRefusal(code: String) {
        state.withLock { $0.refusals[code, default: 0] += 1 }
    }

    /// The refusals that are Apple's failing answers (5xx, timeouts, unreachable; credentials
    /// refused), per app: what one app's broken key or shared secret looks like, apart from the rest.
    func recordAppleFailure(app: String, code: VerificationError.Code) {
        let reason: String
        switch code {
        case .upstreamUnavailable: reason = "unavailable"
        case .upstreamCredentialsRejected: reason = "credentials_rejected"
        case .upstreamInvalidResponse: reason = "invalid_response"
        default: return
        }
        state.withLock { $0.appleFailures[AppleFailure(app: app, reason: reason), default: 0] += 1 }
    }

    /// A ledger write that failed after the answer was decided (the audit row of a refusal, the sealed
    /// latest receipt of a grant): loud, but neither a refusal nor a reason to take the answer back,
    /// so it is counted apart from `iapgw_verification_refusals_total`. `what` is a code constant.
    func recordLostWrite(_ what: String) {
        state.withLock { $0.lostWrites[Self.labelValue(what), default: 0] += 1 }
    }

    public func prometheusText() -> String {
        let s = state.withLock { $0 }
        var out = ""
        // One family: its HELP and TYPE lines, then its series in label order.
        func counter<Key: Comparable>(_ name: String, _ help: String, _ values: [Key: UInt64], _ labels: (Key) -> String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) counter\n"
            for key in values.keys.sorted() { out += "\(name){\(labels(key))} \(values[key]!)\n" }
        }
        func histogram<Key: Comparable>(_ name: String, _ help: String, _ values: [Key: Histogram], _ labels: (Key) -> String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
            for key in values.keys.sorted() { out += values[key]!.lines(name, labels(key)) }
        }
        counter("iapgw_http_requests_total", "HTTP requests by route and status.", s.requests) { key in
            let parts = key.split(separator: "|")
            return "route=\"\(parts[0])\",status=\"\(parts[1])\""
        }
        histogram("iapgw_http_request_duration_seconds", "Request latency by route.", s.latency) { "route=\"\($0)\"" }
        counter("iapgw_verification_refusals_total", "Refused verifications by error code.", s.refusals) { "code=\"\($0)\"" }
        counter("iapgw_ledger_writes_lost_total", "Ledger writes that failed after the answer was decided, by what was lost.",
                s.lostWrites) { "what=\"\($0)\"" }
        counter("iapgw_upstream_calls_total", "Calls to Apple (each retry counted) by endpoint, environment and outcome.",
                s.upstreamCalls) { "\($0.series.labels),outcome=\"\($0.outcome)\"" }
        histogram("iapgw_upstream_call_duration_seconds", "Latency of calls to Apple by endpoint and environment.",
                  s.upstreamLatency) { $0.labels }
        counter("iapgw_apple_failures_total", "Verifications refused because Apple's answer failed, by app and reason.",
                s.appleFailures) { "app=\"\($0.app)\",reason=\"\($0.reason)\"" }
        return out
    }
}

extension GatewayMetrics: UpstreamCallObserver {
    public func upstreamCallFinished(_ label: UpstreamCallLabel, outcome: UpstreamCallOutcome, duration: Duration) {
        let (seconds, attoseconds) = duration.components
        recordUpstream(label, outcome: outcome.label,
                       micros: UInt64(max(0, seconds)) * 1_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000_000))
    }
}
