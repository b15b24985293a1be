import XCTest
import IAPCore

/// Late, early and repeated deliveries: an older fact never moves the state backwards.
final class LifecycleOrderingTests: XCTestCase {
    typealias F = LifecycleFixture
    let f = LifecycleFixture()
    let now = F.day(45)

    private var t1: CanonicalTransaction { f.tx("t1", bought: F.day(0), expires: F.day(30)) }
    private var t2: CanonicalTransaction { f.tx("t2", bought: F.day(30), expires: F.day(60)) }

    private func state(_ events: [LifecycleEvent]) -> SubscriptionState? { LifecycleReplay.finalState(events, now: now) }

    func testRenewalOfAnOlderPeriodArrivingLateChangesNothing() {
        let newer = state([f.event("r2", "DID_RENEW", signed: F.day(30), tx: t2, renewal: f.renewal())])
        let late = f.event("r1", "DID_RENEW", signed: F.day(0), tx: t1, renewal: f.renewal())
        let outcome = SubscriptionLifecycle.apply(late, to: newer, now: now)
        XCTAssertNil(outcome.newState)
        XCTAssertTrue(outcome.stale)
        XCTAssertEqual(outcome.webhooks, [])
    }

    func testExpiredSignedBeforeALaterRenewalDoesNotExpireIt() {
        let expired = f.event("x1", "EXPIRED", "BILLING_RETRY", signed: F.day(30, minute: 1), tx: t1, renewal: f.renewal())
        let renewed = f.event("r2", "DID_RENEW", "BILLING_RECOVERY", signed: F.day(31), tx: t2, renewal: f.renewal())
        XCTAssertEqual(state([renewed, expired])?.state, .active)
        XCTAssertEqual(state([expired, renewed])?.state, .active)
    }

    func testRefundIsNotUndoneByAnOlderRenewalOfTheSameTransaction() {
        let refundedT2 = f.tx("t2", bought: F.day(30), expires: F.day(60), revoked: F.day(35))
        let refund = f.event("rf", "REFUND", signed: F.day(35), tx: refundedT2, renewal: f.renewal(autoRenew: .off))
        let renew = f.event("r2", "DID_RENEW", signed: F.day(30), tx: t2, renewal: f.renewal())
        let outcome = SubscriptionLifecycle.apply(renew, to: state([refund]), now: now)
        XCTAssertTrue(outcome.stale)
        XCTAssertNil(outcome.newState)
        XCTAssertEqual(state([refund, renew])?.state, .refunded)
        XCTAssertEqual(state([refund, renew])?.autoRenewStatus, .off, "the refund's renewal info is newer too")
    }

    func testRefundReversedUndoesOnlyARefundSignedBeforeIt() {
        let refundedT2 = f.tx("t2", bought: F.day(30), expires: F.day(60), revoked: F.day(35))
        let renew = f.event("r2", "DID_RENEW", signed: F.day(30), tx: t2, renewal: f.renewal())
        let firstRefund = f.event("rf1", "REFUND", signed: F.day(35), tx: refundedT2)
        let reversal = f.event("rr", "REFUND_REVERSED", signed: F.day(38), tx: t2)
        let secondRefund = f.event("rf2", "REFUND", signed: F.day(41), tx: refundedT2)
        XCTAssertEqual(state([renew, firstRefund, reversal])?.state, .active)
        XCTAssertEqual(state([renew, reversal, firstRefund])?.state, .active)
        XCTAssertEqual(LifecycleReplay.assertOrderIndependent([renew, firstRefund, reversal, secondRefund], now: now)?.state,
                       .refunded, "a refund signed after the reversal stands")
    }

    func testRefundOfASupersededPeriodDoesNotEndTheCurrentOne() {
        let refundedT1 = f.tx("t1", bought: F.day(0), expires: F.day(30), revoked: F.day(40))
        let events = [f.event("r2", "DID_RENEW", signed: F.day(30), tx: t2, renewal: f.renewal()),
                      f.event("rf1", "REFUND", signed: F.day(40), tx: refundedT1)]
        XCTAssertEqual(LifecycleReplay.assertOrderIndependent(events, now: now)?.state, .active)
    }

    func testRenewalPreferenceFollowsTheNewestSignedRenewalInfo() {
        let off = f.event("off", "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", signed: F.day(10), tx: t1,
                          renewal: f.renewal(autoRenew: .off))
        let on = f.event("on", "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED", signed: F.day(12), tx: t1,
                         renewal: f.renewal(autoRenew: .on))
        let start = f.event("s", "SUBSCRIBED", "INITIAL_BUY", signed: F.day(0), tx: t1, renewal: f.renewal())
        let final = LifecycleReplay.assertOrderIndependent([start, off, on], now: F.day(20))
        XCTAssertEqual(final?.autoRenewStatus, .on)
        let late = SubscriptionLifecycle.apply(off, to: final, now: F.day(20))
        XCTAssertTrue(late.stale)
        XCTAssertEqual(late.webhooks, [], "a stale preference change is not announced")
    }

    func testDuplicateDeliveryIsIdempotent() {
        let renew = f.event("r2", "DID_RENEW", signed: F.day(30), tx: t2, renewal: f.renewal())
        let first = SubscriptionLifecycle.apply(renew, to: nil, now: now)
        let again = SubscriptionLifecycle.apply(renew, to: first.newState, now: now)
        XCTAssertNotNil(first.newState)
        XCTAssertNil(again.newState)
        XCTAssertTrue(again.stale)
        XCTAssertEqual(again.webhooks, [])
    }

    func testRedeliveredNoticeCarriesTheSameIdempotencyKey() {
        let request = f.event("uuid-1", "CONSUMPTION_REQUEST", signed: F.day(31), tx: t2, renewal: f.renewal())
        let base = state([f.event("r2", "DID_RENEW", signed: F.day(30), tx: t2, renewal: f.renewal())])
        let first = SubscriptionLifecycle.apply(request, to: base, now: now)
        let again = SubscriptionLifecycle.apply(request, to: first.newState ?? base, now: now)
        XCTAssertEqual(first.webhooks.map(\.idempotencyKey), again.webhooks.map(\.idempotencyKey))
        XCTAssertEqual(first.webhooks.count, 1)
    }

    func testIdempotencyKeysDifferByEventChainAndKind() {
        let refunded = LifecycleFixture(chainId: "c1", type: .consumable)
        let refund = refunded.event("uuid-9", "REFUND", signed: F.day(3),
                                    tx: refunded.tx("c1", "coins", bought: F.day(1), expires: nil, revoked: F.day(3)))
        let outcome = SubscriptionLifecycle.apply(refund, to: nil, now: now)
        let keys = outcome.webhooks.map(\.idempotencyKey)
        XCTAssertEqual(keys, ["entitlementChanged:2:c1:uuid-9", "consumableRefunded:2:c1:uuid-9"])
        var other = refund
        other.id = "uuid-10"
        let otherKeys = SubscriptionLifecycle.apply(other, to: nil, now: now).webhooks.map(\.idempotencyKey)
        XCTAssertTrue(Set(keys).isDisjoint(with: otherKeys))
    }

    func testSameSignedDateTiesAreBrokenDeterministically() {
        let expired = f.event("a", "EXPIRED", "VOLUNTARY", signed: F.day(30), tx: t1, renewal: f.renewal(autoRenew: .off))
        let failed = f.event("b", "DID_FAIL_TO_RENEW", signed: F.day(30), tx: t1, renewal: f.renewal(retrying: true))
        XCTAssertEqual(state([expired, failed]), state([failed, expired]))
    }
}

/// Reconciliation: a status read back from Apple goes through the same join.
final class LifecycleReconciliationTests: XCTestCase {
    typealias F = LifecycleFixture
    let f = LifecycleFixture()

    private func reconcile(_ tx: CanonicalTransaction, _ renewal: CanonicalRenewal, signed: Int64) -> LifecycleEvent {
        f.event("reconcile:\(signed)", SubscriptionLifecycle.reconciledStatus.rawValue, signed: signed, tx: tx, renewal: renewal)
    }

    func testReconciledStatusRestoresARenewalWhoseNotificationWasLost() {
        let t1 = f.tx("t1", bought: F.day(0), expires: F.day(30))
        let t2 = f.tx("t2", bought: F.day(30), expires: F.day(60))
        let start = f.event("s", "SUBSCRIBED", "INITIAL_BUY", signed: F.day(0), tx: t1, renewal: f.renewal())
        let status = reconcile(t2, f.renewal(), signed: F.day(35))
        let final = LifecycleReplay.assertOrderIndependent([start, status], now: F.day(35))
        XCTAssertEqual(final?.state, .active)
        XCTAssertEqual(final?.lastTransactionId, "t2")
        XCTAssertEqual(final?.source, "reconciliation")
    }

    func testReconciledStatusReadsGraceAndBillingRetryFromRenewalInfo() {
        let t1 = f.tx("t1", bought: F.day(0), expires: F.day(30))
        let grace = reconcile(t1, f.renewal(grace: F.day(46), retrying: true), signed: F.day(31))
        let retry = reconcile(t1, f.renewal(retrying: true), signed: F.day(31))
        let over = reconcile(t1, f.renewal(retrying: false), signed: F.day(31))
        let now = F.day(32)
        XCTAssertEqual(SubscriptionLifecycle.apply(grace, to: nil, now: now).newState?.state, .gracePeriod)
        XCTAssertEqual(SubscriptionLifecycle.apply(retry, to: nil, now: now).newState?.state, .billingRetry)
        XCTAssertEqual(SubscriptionLifecycle.apply(over, to: nil, now: now).newState?.state, .expired)
    }
}
