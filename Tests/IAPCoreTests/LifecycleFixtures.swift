import TestSupport
import XCTest
@testable import IAPConfig
import IAPCore

/// A small DSL for synthetic, already-verified lifecycle events of one purchase chain.
/// Dates are whole days after `LifecycleFixture.epoch` plus a minute offset, so scenarios read
/// like a calendar: `day(30)`, `day(30, minute: 1)`.
struct LifecycleFixture {
    static let epoch: Int64 = 1_700_000_000_000
    static let policy = AppPolicy.GracePeriodPolicy(grantDuringGracePeriod: true, grantDuringBillingRetry: false)

    var bundleId = "com.example.app"
    var chainId = "2000000001"
    var type: TransactionType = .autoRenewable
    var ownership: InAppOwnershipType = .purchased

    static func day(_ n: Int64, minute: Int64 = 0) -> Int64 { epoch + n * 86_400_000 + minute * 60_000 }

    func tx(_ id: String, _ product: String = "pro.monthly", bought: Int64, expires: Int64?,
            revoked: Int64? = nil, reason: RevocationReason? = nil) -> CanonicalTransaction {
        var t = CanonicalTransaction(transactionId: id, productId: product, source: "serverAPI", mappingVersion: "test")
        t.originalTransactionId = chainId
        t.bundleId = bundleId
        t.type = type
        t.purchaseDate = bought
        t.expiresDate = expires
        t.inAppOwnershipType = ownership
        t.revocationDate = revoked
        t.revocationReason = reason
        t.environment = .sandbox
        return t
    }

    func renewal(autoRenew: AutoRenewStatus = .on, next: String? = "pro.monthly", grace: Int64? = nil,
                 retrying: Bool? = nil) -> CanonicalRenewal {
        var r = CanonicalRenewal(originalTransactionId: chainId, source: "serverAPI", mappingVersion: "test")
        r.autoRenewStatus = autoRenew
        r.autoRenewProductId = next
        r.gracePeriodExpiresDate = grace
        r.isInBillingRetryPeriod = retrying
        return r
    }

    func event(_ id: String, _ type: String, _ subtype: String? = nil, signed: Int64,
               tx: CanonicalTransaction?, renewal: CanonicalRenewal? = nil) -> LifecycleEvent {
        LifecycleEvent(id: id, bundleId: bundleId, notificationType: NotificationType(rawValue: type),
                       subtype: subtype.map(NotificationSubtype.init(rawValue:)), signedDate: signed,
                       environment: .sandbox, transaction: tx, renewal: renewal)
    }
}

/// Applying events the way the inbox worker does: each outcome's newState (if any) is stored.
enum LifecycleReplay {
    struct Step { var state: SubscriptionState?; var outcome: LifecycleOutcome }

    static func apply(_ event: LifecycleEvent, to state: SubscriptionState?, now: Int64) -> Step {
        let outcome = SubscriptionLifecycle.apply(event, to: state, now: now)
        return Step(state: outcome.newState ?? state, outcome: outcome)
    }

    /// Every event applied at the same `now`, as a worker draining a backlog would.
    static func finalState(_ events: [LifecycleEvent], now: Int64, from start: SubscriptionState? = nil) -> SubscriptionState? {
        events.reduce(start) { apply($1, to: $0, now: now).state }
    }

    /// Each event applied at its own signedDate, as if delivered in real time.
    static func live(_ events: [LifecycleEvent]) -> [Step] {
        var state: SubscriptionState?
        return events.map { event in
            let step = apply(event, to: state, now: event.signedDate)
            state = step.state
            return step
        }
    }

    /// All orders for short lifecycles, else `count` seeded shuffles (reproducible on failure).
    static func orders<T>(_ items: [T], count: Int = 200, seed: UInt64 = 0x5EED_1CE) -> [[T]] {
        if items.count <= 7 { return permutations(items) }
        var rng = SplitMix(seed: seed)
        return (0..<count).map { _ in items.shuffled(using: &rng) }
    }

    static func permutations<T>(_ items: [T]) -> [[T]] {
        guard let first = items.first else { return [[]] }
        return permutations(Array(items.dropFirst())).flatMap { rest in
            (0...rest.count).map { i in var p = rest; p.insert(first, at: i); return p }
        }
    }

    /// Asserts that every order of `events` ends where the given order ends; returns that state.
    @discardableResult
    static func assertOrderIndependent(_ events: [LifecycleEvent], now: Int64,
                                       file: StaticString = #filePath, line: UInt = #line) -> SubscriptionState? {
        let expected = finalState(events, now: now)
        for order in orders(events) where finalState(order, now: now) != expected {
            XCTFail("order \(order.map(\.id)) ends in \(String(describing: finalState(order, now: now))), " +
                    "not \(String(describing: expected))", file: file, line: line)
            break
        }
        return expected
    }
}
