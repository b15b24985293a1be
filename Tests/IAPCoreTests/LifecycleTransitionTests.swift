import XCTest
import IAPCore

/// One notification at a time against an active chain: what each type/subtype does.
final class LifecycleTransitionTests: XCTestCase {
    typealias F = LifecycleFixture
    let f = LifecycleFixture()
    let now = F.day(20)

    /// An active monthly subscription bought on day 10, auto-renewing.
    private var active: SubscriptionState {
        let tx = f.tx("t1", bought: F.day(10), expires: F.day(40))
        return LifecycleReplay.finalState([f.event("base", "SUBSCRIBED", "INITIAL_BUY", signed: F.day(10), tx: tx,
                                                   renewal: f.renewal())], now: now)!
    }
    private var current: CanonicalTransaction { f.tx("t1", bought: F.day(10), expires: F.day(40)) }

    private func apply(_ type: String, _ subtype: String? = nil, tx: CanonicalTransaction? = nil,
                       renewal: CanonicalRenewal? = nil, to state: SubscriptionState? = nil, id: String = "n1",
                       signed: Int64 = F.day(15)) -> LifecycleOutcome {
        let event = f.event(id, type, subtype, signed: signed, tx: tx ?? current, renewal: renewal ?? f.renewal())
        return SubscriptionLifecycle.apply(event, to: state ?? active, now: now)
    }

    func testEveryKnownTypeAndSubtypeIsHandledWithItsDocumentedEffect() {
        let later = f.tx("t2", bought: F.day(18), expires: F.day(48))
        let premium = f.tx("t2", "premium.monthly", bought: F.day(18), expires: F.day(48))
        let refunded = f.tx("t1", bought: F.day(10), expires: F.day(40), revoked: F.day(15))
        let extended = f.tx("t1", bought: F.day(10), expires: F.day(47))
        // (type, subtype, transaction, renewal, expected state or nil when the entitlement must not change)
        let table: [(String, String?, CanonicalTransaction?, CanonicalRenewal?, Entitlement.State?)] = [
            ("SUBSCRIBED", "INITIAL_BUY", later, nil, .active),
            ("SUBSCRIBED", "RESUBSCRIBE", later, nil, .active),
            ("DID_RENEW", nil, later, nil, .active),
            ("DID_RENEW", "BILLING_RECOVERY", later, nil, .active),
            ("DID_CHANGE_RENEWAL_PREF", "UPGRADE", premium, nil, .active),
            ("DID_CHANGE_RENEWAL_PREF", "DOWNGRADE", nil, f.renewal(next: "basic.monthly"), nil),
            ("DID_CHANGE_RENEWAL_PREF", nil, nil, nil, nil),
            ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", nil, f.renewal(autoRenew: .off), nil),
            ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED", nil, nil, nil),
            ("OFFER_REDEEMED", nil, nil, nil, nil),
            ("OFFER_REDEEMED", "UPGRADE", premium, nil, .active),
            ("OFFER_REDEEMED", "DOWNGRADE", nil, f.renewal(next: "basic.monthly"), nil),
            ("DID_FAIL_TO_RENEW", "GRACE_PERIOD", nil, f.renewal(grace: F.day(30)), .gracePeriod),
            ("DID_FAIL_TO_RENEW", nil, nil, f.renewal(retrying: true), .billingRetry),
            ("GRACE_PERIOD_EXPIRED", nil, nil, f.renewal(retrying: true), .billingRetry),
            ("EXPIRED", "VOLUNTARY", nil, nil, .expired),
            ("EXPIRED", "BILLING_RETRY", nil, nil, .expired),
            ("EXPIRED", "PRICE_INCREASE", nil, nil, .expired),
            ("EXPIRED", "PRODUCT_NOT_FOR_SALE", nil, nil, .expired),
            ("PRICE_INCREASE", "PENDING", nil, nil, nil),
            ("PRICE_INCREASE", "ACCEPTED", nil, nil, nil),
            ("REFUND", nil, refunded, nil, .refunded),
            ("REFUND_DECLINED", nil, nil, nil, nil),
            ("REFUND_REVERSED", nil, nil, nil, .active),
            ("REVOKE", nil, refunded, nil, .revoked),
            ("CONSUMPTION_REQUEST", nil, nil, nil, nil),
            ("RENEWAL_EXTENDED", nil, extended, nil, .active),
            ("RENEWAL_EXTENSION", "SUMMARY", nil, nil, nil),
            ("RENEWAL_EXTENSION", "FAILURE", nil, nil, nil),
            ("ONE_TIME_CHARGE", nil, later, nil, .active),
            ("TEST", nil, nil, nil, nil),
            ("EXTERNAL_PURCHASE_TOKEN", "UNREPORTED", nil, nil, nil),
            ("METADATA_UPDATE", nil, nil, nil, nil),
            ("MIGRATION", nil, nil, nil, nil),
            ("PRICE_CHANGE", nil, nil, nil, nil),
            ("RESCIND_CONSENT", nil, nil, nil, nil),
        ]
        XCTAssertEqual(Set(table.map(\.0)), Set(NotificationType.known.map(\.rawValue)), "every known type is in the table")
        for (type, subtype, tx, renewal, expected) in table {
            let outcome = apply(type, subtype, tx: tx, renewal: renewal)
            let label = "\(type)/\(subtype ?? "-")"
            XCTAssertFalse(outcome.unknownType, label)
            let after = outcome.newState ?? active
            XCTAssertEqual(after.state, expected ?? .active, label)
            let entitlementMoved = outcome.webhooks.contains { $0.kind == .entitlementChanged }
            let expectMove = expected.map { $0 != .active } ?? false || [later, premium, extended].contains(tx ?? current)
            XCTAssertEqual(entitlementMoved, expectMove, label)
        }
    }

    func testUnknownTypeChangesNothingAndIsSurfaced() {
        let outcome = apply("SOMETHING_NEW_FROM_APPLE", tx: f.tx("t9", bought: F.day(19), expires: F.day(90)))
        XCTAssertTrue(outcome.unknownType)
        XCTAssertNil(outcome.newState)
        XCTAssertEqual(outcome.webhooks.map(\.kind), [.unknownNotification])
        XCTAssertEqual(outcome.webhooks.first?.notificationType, "SOMETHING_NEW_FROM_APPLE")
    }

    func testUnknownSubtypeOfAKnownTypeChangesNothing() {
        for (type, subtype) in [("EXPIRED", "NEW_REASON"), ("DID_RENEW", "UPGRADE"), ("REFUND", "PARTIAL"),
                                ("SUBSCRIBED", nil)] {
            let outcome = apply(type, subtype, tx: f.tx("t9", bought: F.day(19), expires: F.day(90)))
            XCTAssertTrue(outcome.unknownType, "\(type)/\(subtype ?? "-")")
            XCTAssertNil(outcome.newState, "\(type)/\(subtype ?? "-")")
        }
    }

    func testTestNotificationYieldsATestWebhookAndNoState() {
        let event = f.event("ping", "TEST", signed: F.day(15), tx: nil)
        let outcome = SubscriptionLifecycle.apply(event, to: nil, now: now)
        XCTAssertNil(outcome.newState)
        XCTAssertEqual(outcome.webhooks.map(\.kind), [.test])
        XCTAssertNil(outcome.webhooks.first?.originalTransactionId)
    }

    func testKindSpecificNoticesAreSentForTheirTypes() {
        XCTAssertEqual(apply("PRICE_INCREASE", "PENDING").webhooks.map(\.kind), [.priceIncrease])
        XCTAssertEqual(apply("REFUND_DECLINED").webhooks.map(\.kind), [.refundDeclined])
        XCTAssertEqual(apply("CONSUMPTION_REQUEST").webhooks.map(\.kind), [.consumptionRequested])
        XCTAssertEqual(apply("RESCIND_CONSENT").webhooks.map(\.kind), [.consentRescinded])
        XCTAssertEqual(apply("EXTERNAL_PURCHASE_TOKEN", "UNREPORTED").webhooks.map(\.kind), [])
    }

    func testGracePeriodAlreadyOverWhenAppliedIsBillingRetry() {
        let outcome = apply("DID_FAIL_TO_RENEW", "GRACE_PERIOD", renewal: f.renewal(grace: F.day(19), retrying: true))
        XCTAssertEqual(outcome.newState?.state, .billingRetry)
        XCTAssertEqual(outcome.newState?.gracePeriodExpiresDate, F.day(19))
    }

    func testGracePeriodExpiredWithBillingRetryOverIsExpired() {
        let outcome = apply("GRACE_PERIOD_EXPIRED", renewal: f.renewal(grace: F.day(14), retrying: false))
        XCTAssertEqual(outcome.newState?.state, .expired)
    }

    func testRenewalExtendedMovesExpiresDateAndSaysSo() {
        let outcome = apply("RENEWAL_EXTENDED", tx: f.tx("t1", bought: F.day(10), expires: F.day(47)))
        XCTAssertEqual(outcome.newState?.expiresDate, F.day(47))
        XCTAssertEqual(outcome.webhooks.map(\.kind), [.entitlementChanged])
        XCTAssertEqual(outcome.webhooks.first?.expiresDate, F.day(47))
    }

    func testNonConsumableOneTimeChargeIsActiveWithoutEndDate() {
        let lifetime = LifecycleFixture(chainId: "4000000001", type: .nonConsumable)
        let event = lifetime.event("n", "ONE_TIME_CHARGE", signed: F.day(1),
                                   tx: lifetime.tx("4000000001", "lifetime", bought: F.day(1), expires: nil))
        let outcome = SubscriptionLifecycle.apply(event, to: nil, now: now)
        XCTAssertEqual(outcome.newState?.state, .active)
        XCTAssertNil(outcome.newState?.expiresDate)
        XCTAssertEqual(outcome.webhooks.map(\.kind), [.entitlementChanged])
    }

    func testSubscriptionTransactionWithoutExpiresDateGrantsNothing() {
        let outcome = apply("DID_RENEW", tx: f.tx("t2", bought: F.day(18), expires: nil))
        XCTAssertEqual(outcome.newState?.state, .expired)
    }

    func testEventOfAnotherChainLeavesTheStateAlone() {
        let other = LifecycleFixture(chainId: "9999")
        let event = other.event("x", "EXPIRED", "VOLUNTARY", signed: F.day(19),
                                tx: other.tx("x1", bought: F.day(19), expires: F.day(19)))
        let outcome = SubscriptionLifecycle.apply(event, to: active, now: now)
        XCTAssertNil(outcome.newState)
        XCTAssertEqual(outcome.webhooks, [])
    }

    func testRenewalInfoAloneDoesNotFoundAChain() {
        let event = f.event("r", "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", signed: F.day(1), tx: nil,
                            renewal: f.renewal(autoRenew: .off))
        XCTAssertNil(SubscriptionLifecycle.apply(event, to: nil, now: now).newState)
    }

    func testInformationalEventFoundsAProvisionalChainThatAnyDecisiveEventOverrides() {
        let notice = f.event("i", "PRICE_INCREASE", "PENDING", signed: F.day(30), tx: current, renewal: f.renewal())
        let provisional = SubscriptionLifecycle.apply(notice, to: nil, now: now).newState
        XCTAssertEqual(provisional?.state, .active)
        XCTAssertEqual(provisional?.entitlementVersion?.decisive, false)
        let expiry = f.event("x", "EXPIRED", "VOLUNTARY", signed: F.day(12), tx: current, renewal: f.renewal())
        let after = SubscriptionLifecycle.apply(expiry, to: provisional, now: now).newState
        XCTAssertEqual(after?.state, .expired, "an older decisive event still beats a newer notice")
    }
}
