import XCTest
import IAPCore

/// Whole lifecycles, step by step as delivered, then in every order (or 200 seeded shuffles).
final class LifecycleScenarioTests: XCTestCase {
    typealias F = LifecycleFixture
    let f = LifecycleFixture()

    private func kinds(_ step: LifecycleReplay.Step) -> [WebhookEvent.Kind] { step.outcome.webhooks.map(\.kind) }

    // MARK: trial → renew → fail to renew (grace) → recover

    private var trialRenewGraceRecover: [LifecycleEvent] {
        let tx1 = f.tx("t1", bought: F.day(0), expires: F.day(7))
        let tx2 = f.tx("t2", bought: F.day(7), expires: F.day(37))
        let tx3 = f.tx("t3", bought: F.day(40), expires: F.day(70))
        return [
            f.event("e1", "SUBSCRIBED", "INITIAL_BUY", signed: F.day(0, minute: 1), tx: tx1, renewal: f.renewal()),
            f.event("e2", "DID_RENEW", signed: F.day(7, minute: 1), tx: tx2, renewal: f.renewal()),
            f.event("e3", "DID_FAIL_TO_RENEW", "GRACE_PERIOD", signed: F.day(37, minute: 1), tx: tx2,
                    renewal: f.renewal(grace: F.day(53), retrying: true)),
            f.event("e4", "DID_RENEW", "BILLING_RECOVERY", signed: F.day(40, minute: 1), tx: tx3, renewal: f.renewal()),
        ]
    }

    func testTrialRenewGraceRecoverMovesThroughGracePeriodBackToActive() {
        let steps = LifecycleReplay.live(trialRenewGraceRecover)
        XCTAssertEqual(steps.map { $0.state?.state }, [.active, .active, .gracePeriod, .active])
        XCTAssertEqual(steps[1].state?.expiresDate, F.day(37))
        XCTAssertEqual(steps[2].state?.gracePeriodExpiresDate, F.day(53))
        XCTAssertEqual(steps[3].state?.gracePeriodExpiresDate, nil)
        XCTAssertEqual(steps[3].state?.expiresDate, F.day(70))
        XCTAssertEqual(steps[3].state?.lastTransactionId, "t3")
        // The renewal and the billing failure arrive a minute after the period they follow ended:
        // the clock had ended access meanwhile, and that end is announced (the sweep's event, same
        // key) before the notification's own change.
        XCTAssertEqual(steps.map(kinds), [[.entitlementChanged], [.entitlementChanged, .entitlementChanged],
                                          [.entitlementChanged, .entitlementChanged], [.entitlementChanged]])
        XCTAssertEqual(steps.map { $0.outcome.webhooks.map(\.notificationType) },
                       [["SUBSCRIBED"], [EntitlementAccess.periodEndedNotificationType, "DID_RENEW"],
                        [EntitlementAccess.periodEndedNotificationType, "DID_FAIL_TO_RENEW"], ["DID_RENEW"]])
    }

    func testTrialRenewGraceRecoverEndsTheSameInEveryOrder() {
        let final = LifecycleReplay.assertOrderIndependent(trialRenewGraceRecover, now: F.day(41))
        XCTAssertEqual(final?.state, .active)
        XCTAssertEqual(final?.expiresDate, F.day(70))
    }

    func testGraceThatRunsOutWithoutRecoveryEndsInBillingRetryThenExpired() {
        let tx2 = f.tx("t2", bought: F.day(7), expires: F.day(37))
        let events = Array(trialRenewGraceRecover.prefix(3)) + [
            f.event("e5", "GRACE_PERIOD_EXPIRED", signed: F.day(53, minute: 1), tx: tx2,
                    renewal: f.renewal(grace: F.day(53), retrying: true)),
            f.event("e6", "EXPIRED", "BILLING_RETRY", signed: F.day(97), tx: tx2,
                    renewal: f.renewal(retrying: false)),
        ]
        XCTAssertEqual(LifecycleReplay.live(events).map { $0.state?.state },
                       [.active, .active, .gracePeriod, .billingRetry, .expired])
        XCTAssertEqual(LifecycleReplay.assertOrderIndependent(events, now: F.day(98))?.state, .expired)
    }

    // MARK: cancel → expire

    private var cancelThenExpire: [LifecycleEvent] {
        let tx1 = f.tx("t1", bought: F.day(0), expires: F.day(30))
        return [
            f.event("e1", "SUBSCRIBED", "INITIAL_BUY", signed: F.day(0), tx: tx1, renewal: f.renewal()),
            f.event("e2", "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", signed: F.day(10), tx: tx1,
                    renewal: f.renewal(autoRenew: .off)),
            f.event("e3", "EXPIRED", "VOLUNTARY", signed: F.day(30, minute: 1), tx: tx1,
                    renewal: f.renewal(autoRenew: .off)),
        ]
    }

    func testCancelKeepsAccessUntilExpiryThenExpires() {
        let steps = LifecycleReplay.live(cancelThenExpire)
        XCTAssertEqual(steps.map { $0.state?.state }, [.active, .active, .expired])
        XCTAssertEqual(steps[1].state?.autoRenewStatus, .off)
        XCTAssertEqual(kinds(steps[1]), [.renewalPreferenceChanged], "disabling auto-renew is no entitlement change")
        XCTAssertEqual(kinds(steps[2]), [.entitlementChanged])
    }

    func testCancelThenExpireEndsTheSameInEveryOrder() {
        let final = LifecycleReplay.assertOrderIndependent(cancelThenExpire, now: F.day(31))
        XCTAssertEqual(final?.state, .expired)
        XCTAssertEqual(final?.autoRenewStatus, .off)
    }

    // MARK: upgrade and downgrade

    private var upgrade: [LifecycleEvent] {
        let basic = f.tx("t1", "basic.monthly", bought: F.day(0), expires: F.day(30))
        let premium = f.tx("t2", "premium.monthly", bought: F.day(10), expires: F.day(40))
        let renewed = f.tx("t3", "premium.monthly", bought: F.day(40), expires: F.day(70))
        return [
            f.event("e1", "SUBSCRIBED", "INITIAL_BUY", signed: F.day(0), tx: basic, renewal: f.renewal(next: "basic.monthly")),
            f.event("e2", "DID_CHANGE_RENEWAL_PREF", "UPGRADE", signed: F.day(10), tx: premium,
                    renewal: f.renewal(next: "premium.monthly")),
            f.event("e3", "DID_RENEW", signed: F.day(40), tx: renewed, renewal: f.renewal(next: "premium.monthly")),
        ]
    }

    func testUpgradeMovesTheEntitlementToTheNewProductAtOnce() {
        let steps = LifecycleReplay.live(upgrade)
        XCTAssertEqual(steps.map { $0.state?.productId }, ["basic.monthly", "premium.monthly", "premium.monthly"])
        XCTAssertEqual(steps[1].state?.expiresDate, F.day(40))
        XCTAssertEqual(kinds(steps[1]), [.entitlementChanged, .renewalPreferenceChanged])
        XCTAssertEqual(LifecycleReplay.assertOrderIndependent(upgrade, now: F.day(41))?.productId, "premium.monthly")
    }

    private var downgrade: [LifecycleEvent] {
        let premium = f.tx("t1", "premium.monthly", bought: F.day(0), expires: F.day(30))
        let basic = f.tx("t2", "basic.monthly", bought: F.day(30), expires: F.day(60))
        return [
            f.event("e1", "SUBSCRIBED", "INITIAL_BUY", signed: F.day(0), tx: premium, renewal: f.renewal(next: "premium.monthly")),
            f.event("e2", "DID_CHANGE_RENEWAL_PREF", "DOWNGRADE", signed: F.day(10), tx: premium,
                    renewal: f.renewal(next: "basic.monthly")),
            f.event("e3", "DID_RENEW", signed: F.day(30), tx: basic, renewal: f.renewal(next: "basic.monthly")),
        ]
    }

    func testDowngradeKeepsTheCurrentProductUntilTheNextRenewal() {
        let steps = LifecycleReplay.live(downgrade)
        XCTAssertEqual(steps[1].state?.productId, "premium.monthly")
        XCTAssertEqual(steps[1].state?.autoRenewProductId, "basic.monthly")
        XCTAssertEqual(kinds(steps[1]), [.renewalPreferenceChanged])
        XCTAssertEqual(steps[2].state?.productId, "basic.monthly")
        // The renewal is signed at the very end of the paid period, when the clock (which ends a
        // period the skew allowance early, fail closed) had already ended it: that end comes first.
        XCTAssertEqual(steps[2].outcome.webhooks.map(\.notificationType),
                       [EntitlementAccess.periodEndedNotificationType, "DID_RENEW"])
        let final = LifecycleReplay.assertOrderIndependent(downgrade, now: F.day(31))
        XCTAssertEqual(final?.productId, "basic.monthly")
        XCTAssertEqual(final?.autoRenewProductId, "basic.monthly")
    }

    // MARK: refund → refund reversed

    private var refundReversed: [LifecycleEvent] {
        let tx1 = f.tx("t1", bought: F.day(0), expires: F.day(30))
        let refunded = f.tx("t1", bought: F.day(0), expires: F.day(30), revoked: F.day(5), reason: .appIssue)
        return [
            f.event("e1", "SUBSCRIBED", "INITIAL_BUY", signed: F.day(0), tx: tx1, renewal: f.renewal()),
            f.event("e2", "REFUND", signed: F.day(5), tx: refunded, renewal: f.renewal(autoRenew: .off)),
            f.event("e3", "REFUND_REVERSED", signed: F.day(8), tx: tx1, renewal: f.renewal(autoRenew: .off)),
        ]
    }

    func testRefundReversedRestoresWhatTheTransactionDatesImply() {
        let steps = LifecycleReplay.live(refundReversed)
        XCTAssertEqual(steps.map { $0.state?.state }, [.active, .refunded, .active])
        XCTAssertEqual(steps[1].state?.revocationDate, F.day(5))
        XCTAssertEqual(steps[1].state?.revocationReason, .appIssue)
        XCTAssertNil(steps[2].state?.revocationDate)
        XCTAssertEqual(LifecycleReplay.assertOrderIndependent(refundReversed, now: F.day(9))?.state, .active)
        XCTAssertEqual(LifecycleReplay.finalState(refundReversed, now: F.day(31))?.state, .expired,
                       "a reversal after the period ended restores an expired subscription, not access")
    }

    // MARK: family-shared revoke

    func testFamilySharedRevokeIsRevokedNotRefundedInEveryOrder() {
        let shared = LifecycleFixture(ownership: .familyShared)
        let tx1 = shared.tx("t1", bought: F.day(0), expires: F.day(30))
        let gone = shared.tx("t1", bought: F.day(0), expires: F.day(30), revoked: F.day(4))
        let events = [
            shared.event("e1", "SUBSCRIBED", "INITIAL_BUY", signed: F.day(0), tx: tx1, renewal: shared.renewal()),
            shared.event("e2", "REVOKE", signed: F.day(4), tx: gone, renewal: shared.renewal()),
        ]
        let steps = LifecycleReplay.live(events)
        XCTAssertEqual(steps[1].state?.state, .revoked)
        XCTAssertEqual(kinds(steps[1]), [.entitlementChanged], "a revocation is not a consumable refund")
        XCTAssertEqual(LifecycleReplay.assertOrderIndependent(events, now: F.day(5))?.state, .revoked)
    }

    // MARK: consumable refund

    private let consumable = LifecycleFixture(chainId: "3000000001", type: .consumable)

    private var consumableRefund: [LifecycleEvent] {
        let coins = consumable.tx("3000000001", "coins.100", bought: F.day(0), expires: nil)
        let refunded = consumable.tx("3000000001", "coins.100", bought: F.day(0), expires: nil, revoked: F.day(2))
        return [
            consumable.event("e1", "ONE_TIME_CHARGE", signed: F.day(0), tx: coins),
            consumable.event("e2", "CONSUMPTION_REQUEST", signed: F.day(1), tx: coins),
            consumable.event("e3", "REFUND", signed: F.day(2), tx: refunded),
        ]
    }

    func testConsumableRefundIsRecordedForClawback() {
        let steps = LifecycleReplay.live(consumableRefund)
        // Credited, never lasting access; only the refund moves it.
        XCTAssertEqual(steps.map { $0.state?.state }, [.credited, .credited, .refunded])
        XCTAssertEqual(kinds(steps[0]), [.entitlementChanged])
        XCTAssertEqual(kinds(steps[1]), [.consumptionRequested])
        XCTAssertEqual(kinds(steps[2]), [.entitlementChanged, .consumableRefunded])
        XCTAssertEqual(steps[2].outcome.webhooks.last?.transactionId, "3000000001")
        XCTAssertEqual(LifecycleReplay.assertOrderIndependent(consumableRefund, now: F.day(3))?.state, .refunded)
    }

    func testConsumableRefundArrivingFirstStillAsksForClawback() {
        let outcome = SubscriptionLifecycle.apply(consumableRefund[2], to: nil, now: F.day(3))
        XCTAssertEqual(outcome.newState?.state, .refunded)
        XCTAssertTrue(outcome.webhooks.map(\.kind).contains(.consumableRefunded))
    }

    // MARK: a long lifecycle touching most types, with duplicates, in 200 seeded shuffles

    func testLongLifecycleWithDuplicatesEndsTheSameInTwoHundredShuffles() {
        let t1 = f.tx("t1", bought: F.day(0), expires: F.day(7))
        let t2 = f.tx("t2", bought: F.day(7), expires: F.day(37))
        let t3 = f.tx("t3", bought: F.day(37), expires: F.day(67))
        let t3Extended = f.tx("t3", bought: F.day(37), expires: F.day(74))
        let t4 = f.tx("t4", "basic.monthly", bought: F.day(80), expires: F.day(110))
        var events = [
            f.event("a", "SUBSCRIBED", "INITIAL_BUY", signed: F.day(0), tx: t1, renewal: f.renewal()),
            f.event("b", "DID_RENEW", signed: F.day(7), tx: t2, renewal: f.renewal()),
            f.event("c", "PRICE_INCREASE", "PENDING", signed: F.day(9), tx: t2, renewal: f.renewal()),
            f.event("d", "PRICE_INCREASE", "ACCEPTED", signed: F.day(12), tx: t2, renewal: f.renewal()),
            f.event("e", "DID_FAIL_TO_RENEW", signed: F.day(37, minute: 1), tx: t2, renewal: f.renewal(retrying: true)),
            f.event("f", "DID_RENEW", "BILLING_RECOVERY", signed: F.day(37, minute: 5), tx: t3, renewal: f.renewal()),
            f.event("g", "RENEWAL_EXTENDED", signed: F.day(40), tx: t3Extended, renewal: f.renewal()),
            f.event("h", "DID_CHANGE_RENEWAL_PREF", "DOWNGRADE", signed: F.day(50), tx: t3Extended,
                    renewal: f.renewal(next: "basic.monthly")),
            f.event("i", "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", signed: F.day(60), tx: t3Extended,
                    renewal: f.renewal(autoRenew: .off, next: "basic.monthly")),
            f.event("j", "EXPIRED", "VOLUNTARY", signed: F.day(74, minute: 1), tx: t3Extended,
                    renewal: f.renewal(autoRenew: .off, next: "basic.monthly")),
            f.event("k", "SUBSCRIBED", "RESUBSCRIBE", signed: F.day(80), tx: t4, renewal: f.renewal(next: "basic.monthly")),
            f.event("l", "METADATA_UPDATE", signed: F.day(81), tx: t4, renewal: f.renewal(next: "basic.monthly")),
        ]
        events += [events[1], events[5], events[9]]   // at-least-once delivery
        let final = LifecycleReplay.assertOrderIndependent(events, now: F.day(82))
        XCTAssertEqual(final?.state, .active)
        XCTAssertEqual(final?.productId, "basic.monthly")
        XCTAssertEqual(final?.lastTransactionId, "t4")
        XCTAssertEqual(final?.autoRenewStatus, .on)
        XCTAssertEqual(final?.lastSignedDate, F.day(81))
    }
}
