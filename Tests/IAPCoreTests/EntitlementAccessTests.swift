import XCTest
@testable import IAPConfig
import IAPCore

/// The one function that says what an entitlement is at a given time and whether it grants
/// access, driven by an injected clock (`now`): the stored facts never change here, only the time.
final class EntitlementAccessTests: XCTestCase {
    typealias F = LifecycleFixture
    let f = LifecycleFixture()
    let skew = EntitlementAccess.clockSkewAllowanceMillis
    let expires = F.day(30)

    func testActiveEndsAsExpiredTheSkewAllowanceBeforeItsStatedExpiry() {
        XCTAssertEqual(EntitlementAccess.state(recorded: .active, periodEnd: expires, now: expires - skew - 1), .active)
        XCTAssertEqual(EntitlementAccess.state(recorded: .active, periodEnd: expires, now: expires - skew), .expired,
                       "the allowance errs toward ending access: a clock behind Apple's never extends it")
        XCTAssertEqual(EntitlementAccess.state(recorded: .active, periodEnd: expires, now: expires + 1), .expired)
        XCTAssertEqual(EntitlementAccess.state(recorded: .active, periodEnd: nil, now: .max), .active,
                       "a purchase without an end date (non-consumable) never ends by time")
        XCTAssertEqual(EntitlementAccess.state(recorded: .active, periodEnd: .min + 1, now: .min), .expired,
                       "an end date at the start of time does not wrap around into the future")
    }

    func testGracePeriodEndsAsBillingRetryAtItsEnd() {
        let graceEnd = F.day(46)
        XCTAssertEqual(EntitlementAccess.state(recorded: .gracePeriod, periodEnd: graceEnd, now: graceEnd - skew - 1),
                       .gracePeriod)
        XCTAssertEqual(EntitlementAccess.state(recorded: .gracePeriod, periodEnd: graceEnd, now: graceEnd - skew), .billingRetry)
    }

    func testTheClockNeverRevivesNorEndsWhatHasNoEndDateOfItsOwn() {
        for state in [Entitlement.State.billingRetry, .expired, .refunded, .revoked] {
            XCTAssertEqual(EntitlementAccess.state(recorded: state, periodEnd: expires, now: expires - 86_400_000), state)
            XCTAssertEqual(EntitlementAccess.state(recorded: state, periodEnd: expires, now: expires + 86_400_000), state)
        }
    }

    func testAccessFollowsThePolicyForGraceAndBillingRetry() {
        let lenient = AppPolicy.GracePeriodPolicy(grantDuringGracePeriod: true, grantDuringBillingRetry: true)
        let strict = AppPolicy.GracePeriodPolicy(grantDuringGracePeriod: false, grantDuringBillingRetry: false)
        XCTAssertEqual(Entitlement.State.allCases.filter { EntitlementAccess.grantsAccess($0, policy: lenient) },
                       [.active, .gracePeriod, .billingRetry])
        XCTAssertEqual(Entitlement.State.allCases.filter { EntitlementAccess.grantsAccess($0, policy: strict) }, [.active])
        XCTAssertEqual(Entitlement.State.allCases.filter { EntitlementAccess.grantsAccess($0, policy: F.policy) },
                       [.active, .gracePeriod])
    }

    func testATransactionsStateComesFromItsDatesItsRenewalAndItsRevocation() {
        let tx = f.tx("t1", bought: F.day(0), expires: expires)
        XCTAssertEqual(EntitlementAccess.state(of: tx, renewal: nil, now: expires - skew - 1), .active)
        XCTAssertEqual(EntitlementAccess.state(of: tx, renewal: nil, now: expires + skew + 1), .expired)
        let grace = f.renewal(grace: F.day(46), retrying: true)
        XCTAssertEqual(EntitlementAccess.state(of: tx, renewal: grace, now: F.day(40)), .gracePeriod)
        XCTAssertEqual(EntitlementAccess.periodEnd(of: tx, renewal: grace, in: .gracePeriod), F.day(46))
        XCTAssertEqual(EntitlementAccess.state(of: tx, renewal: grace, now: F.day(47)), .billingRetry)
        XCTAssertEqual(EntitlementAccess.state(of: tx, renewal: f.renewal(grace: F.day(46), retrying: false), now: F.day(47)),
                       .expired)
        let refunded = f.tx("t1", bought: F.day(0), expires: expires, revoked: F.day(3), reason: .other)
        XCTAssertEqual(EntitlementAccess.state(of: refunded, renewal: nil, now: F.day(1)), .refunded)
    }

    /// One entitlement derivation: the lifecycle, the claim path and the comparator once agreed on
    /// everything but an auto-renewable without an end date (the lifecycle said expired, the
    /// others active); now every path says it grants nothing.
    func testAnAutoRenewableWithoutAnEndDateGrantsNothingOnEveryPath() {
        let noEnd = f.tx("t1", bought: F.day(0), expires: nil)
        XCTAssertEqual(EntitlementAccess.state(of: noEnd, renewal: nil, now: F.day(1)), .expired)
        let subscribed = f.event("e1", "SUBSCRIBED", "INITIAL_BUY", signed: F.day(0), tx: noEnd)
        let lifecycle = SubscriptionLifecycle.apply(subscribed, to: nil, now: F.day(1))
        XCTAssertEqual(lifecycle.newState?.state, .expired)
        let reconciled = f.event("reconcile:1", SubscriptionLifecycle.reconciledStatus.rawValue, signed: F.day(0), tx: noEnd,
                                 renewal: f.renewal())
        XCTAssertEqual(SubscriptionLifecycle.apply(reconciled, to: nil, now: F.day(1)).newState?.state, .expired)
        var nonConsumable = noEnd
        nonConsumable.type = .nonConsumable
        XCTAssertEqual(EntitlementAccess.state(of: nonConsumable, renewal: nil, now: F.day(1)), .active)
    }

    func testThePeriodEndedEventHasOneKeyPerChainAndTransition() throws {
        func ended(_ periodEnd: Int64, now: Int64) -> WebhookEvent? {
            EntitlementAccess.periodEnded(bundleId: f.bundleId, originalTransactionId: f.chainId, productId: "pro.monthly",
                                          recorded: .active, periodEnd: periodEnd, now: now)
        }
        XCTAssertNil(ended(expires, now: expires - skew - 1), "nothing ended yet")
        let first = try XCTUnwrap(ended(expires, now: expires - skew))
        let later = try XCTUnwrap(ended(expires, now: expires + 3_600_000))
        XCTAssertEqual(first, later, "two sweeps (or two instances) make the same event")
        XCTAssertEqual(first.kind, .entitlementChanged)
        XCTAssertEqual(first.state, .expired)
        XCTAssertEqual(first.occurredAt, expires)
        XCTAssertEqual(first.notificationType, EntitlementAccess.periodEndedNotificationType)
        let nextPeriod = try XCTUnwrap(ended(F.day(60), now: F.day(61)))
        XCTAssertNotEqual(nextPeriod.idempotencyKey, first.idempotencyKey, "a renewed period ends with an event of its own")
    }

    /// Access ending by the clock alone: auto-renew switched off, then the expiry passes with no
    /// notification. The next event the lifecycle applies (here a late repeat of the same switch)
    /// announces the end once, with the sweep's key, and not a second time as its own change.
    func testAnEventAfterTheClockEndedAccessAnnouncesTheEndOnceWithTheSweepsKey() throws {
        let tx = f.tx("t1", bought: F.day(0), expires: expires)
        let off = f.event("e1", "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", signed: F.day(10), tx: tx,
                          renewal: f.renewal(autoRenew: .off))
        let stored = try XCTUnwrap(SubscriptionLifecycle.apply(off, to: nil, now: F.day(10)).newState)
        XCTAssertEqual(stored.state, .active)

        let again = f.event("e2", "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", signed: F.day(29), tx: tx,
                            renewal: f.renewal(autoRenew: .off))
        let late = SubscriptionLifecycle.apply(again, to: stored, now: expires + skew + 1_500)
        XCTAssertEqual(late.newState?.state, .expired)
        let changes = late.webhooks.filter { $0.kind == .entitlementChanged }
        XCTAssertEqual(changes, [EntitlementAccess.periodEnded(bundleId: f.bundleId, originalTransactionId: f.chainId,
                                                               productId: "pro.monthly", recorded: .active,
                                                               periodEnd: expires, now: expires + skew + 1_500)])
        XCTAssertEqual(EntitlementAccess.current(stored, now: expires + skew + 1).state, .expired)
    }
}
