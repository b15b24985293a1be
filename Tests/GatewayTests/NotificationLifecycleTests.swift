import AppStoreSimulator
import Foundation
import IAPCore
import TestSupport
import XCTest

/// Whole subscription lifecycles: the simulator, as Apple, signs each notification and posts it to
/// the running gateway; the entitlement is read back through the app's API once it is processed.
final class NotificationLifecycleTests: XCTestCase {
    func testTrialRenewalGracePeriodAndBillingRecoveryKeepTheEntitlementFollowingApple() async throws {
        let e2e = try await NotificationE2E.start(self)
        let trial = try e2e.subscribe(owner: "device-ana", trial: true)
        // Claimed through the receipt (no price in it): the Server API path refuses a free trial's
        // price of 0 against the catalog's 4990 (PRICE_MISMATCH), a bug reported separately.
        let claimed = try await e2e.gw.verifyReceipt(trial.receiptBase64, account: "ana")
        XCTAssertEqual(claimed.status, 200, claimed.text)
        let chain = trial.originalTransactionId

        try await e2e.deliver("SUBSCRIBED", "INITIAL_BUY", about: trial)
        var now = try await e2e.summary("ana", chain: chain)
        XCTAssertEqual(now?.state, "active")
        XCTAssertEqual(now?.expiresDate, try expiresDate(of: trial))

        let renewal = try e2e.simulator.renew(originalTransactionId: chain)
        try await e2e.deliver("DID_RENEW", about: renewal)
        now = try await e2e.summary("ana", chain: chain)
        XCTAssertEqual(now?.state, "active")
        XCTAssertEqual(now?.expiresDate, try expiresDate(of: renewal))

        let failed = try e2e.simulator.expire(originalTransactionId: chain, intent: 2, billingRetry: true,
                                              gracePeriodSeconds: 16 * 86_400)
        try await e2e.deliver("DID_FAIL_TO_RENEW", "GRACE_PERIOD", about: failed)
        now = try await e2e.summary("ana", chain: chain)
        XCTAssertEqual(now?.state, "gracePeriod")
        XCTAssertEqual(now?.grantsAccess, true, "the demo policy grants access during the grace period")

        let recovered = try e2e.simulator.renew(originalTransactionId: chain)
        try await e2e.deliver("DID_RENEW", "BILLING_RECOVERY", about: recovered)
        now = try await e2e.summary("ana", chain: chain)
        XCTAssertEqual(now?.state, "active")
        XCTAssertEqual(now?.grantsAccess, true)
        XCTAssertEqual(now?.expiresDate, try expiresDate(of: recovered))
    }

    func testBillingRetryWithoutGracePeriodWithdrawsAccessUnderTheDemoPolicy() async throws {
        let e2e = try await NotificationE2E.start(self)
        let purchase = try e2e.subscribe(owner: "device-bo")
        try await e2e.claim(purchase, account: "bo")

        let failed = try e2e.simulator.expire(originalTransactionId: purchase.originalTransactionId, intent: 2, billingRetry: true)
        try await e2e.deliver("DID_FAIL_TO_RENEW", about: failed)

        let now = try await e2e.summary("bo", chain: purchase.originalTransactionId)
        XCTAssertEqual(now?.state, "billingRetry")
        XCTAssertEqual(now?.grantsAccess, false)
    }

    func testCancellingKeepsAccessUntilTheSubscriptionExpires() async throws {
        let e2e = try await NotificationE2E.start(self)
        let purchase = try e2e.subscribe(owner: "device-cy")
        try await e2e.claim(purchase, account: "cy")
        let chain = purchase.originalTransactionId

        let cancelled = try e2e.simulator.changeRenewalPreference(originalTransactionId: chain, autoRenew: false)
        try await e2e.deliver("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", about: cancelled)
        var now = try await e2e.summary("cy", chain: chain)
        XCTAssertEqual(now?.state, "active", "turning auto-renew off ends nothing yet")
        XCTAssertEqual(now?.grantsAccess, true)

        let expired = try e2e.simulator.expire(originalTransactionId: chain, intent: 1)
        try await e2e.deliver("EXPIRED", "VOLUNTARY", about: expired)
        now = try await e2e.summary("cy", chain: chain)
        XCTAssertEqual(now?.state, "expired")
        XCTAssertEqual(now?.grantsAccess, false)
    }

    func testUpgradeMovesTheEntitlementAtOnceAndDowngradeOnlyAtTheNextRenewal() async throws {
        let e2e = try await NotificationE2E.start(self)
        let purchase = try e2e.subscribe(owner: "device-di")
        try await e2e.claim(purchase, account: "di")
        let chain = purchase.originalTransactionId

        let upgraded = try e2e.simulator.changeProduct(originalTransactionId: chain, to: NotificationE2E.premium)
        try await e2e.deliver("DID_CHANGE_RENEWAL_PREF", "UPGRADE", about: upgraded)
        var now = try await e2e.summary("di", chain: chain)
        XCTAssertEqual(now?.productId, NotificationE2E.premium)
        XCTAssertEqual(now?.state, "active")
        XCTAssertEqual(now?.expiresDate, try expiresDate(of: upgraded))

        let downgradeChosen = try e2e.simulator.changeRenewalPreference(originalTransactionId: chain,
                                                                        productId: GatewayE2E.monthly)
        try await e2e.deliver("DID_CHANGE_RENEWAL_PREF", "DOWNGRADE", about: downgradeChosen)
        now = try await e2e.summary("di", chain: chain)
        XCTAssertEqual(now?.productId, NotificationE2E.premium, "a downgrade waits for the end of the paid period")

        let renewedLower = try e2e.simulator.renew(originalTransactionId: chain)
        XCTAssertEqual(renewedLower.productId, GatewayE2E.monthly)
        try await e2e.deliver("DID_RENEW", about: renewedLower)
        now = try await e2e.summary("di", chain: chain)
        XCTAssertEqual(now?.productId, GatewayE2E.monthly)
        XCTAssertEqual(now?.state, "active")
        XCTAssertEqual(now?.expiresDate, try expiresDate(of: renewedLower))
    }

    func testRefundWithdrawsAccessAndRefundReversedRestoresIt() async throws {
        let e2e = try await NotificationE2E.start(self)
        let purchase = try e2e.gw.buy(GatewayE2E.removeAds, owner: "device-ed")
        try await e2e.claim(purchase, account: "ed")

        let refunded = try e2e.simulator.refund(transactionId: purchase.transactionId, reason: 1)
        try await e2e.deliver("REFUND", about: refunded)
        var now = try await e2e.summary("ed", chain: purchase.originalTransactionId)
        XCTAssertEqual(now?.state, "refunded")
        XCTAssertEqual(now?.grantsAccess, false)

        let reversed = try e2e.simulator.reverseRefund(transactionId: purchase.transactionId)
        try await e2e.deliver("REFUND_REVERSED", about: reversed)
        now = try await e2e.summary("ed", chain: purchase.originalTransactionId)
        XCTAssertEqual(now?.state, "active")
        XCTAssertEqual(now?.grantsAccess, true)
    }

    func testFamilySharingRevocationIsRecordedAsRevokedNotRefunded() async throws {
        let e2e = try await NotificationE2E.start(self)
        let shared = try e2e.subscribe(owner: "device-kid", familyShared: true)
        try await e2e.claim(shared, account: "kid")
        try await e2e.deliver("SUBSCRIBED", "INITIAL_BUY", about: shared)

        let revoked = try e2e.simulator.revoke(transactionId: shared.transactionId)
        try await e2e.deliver("REVOKE", about: revoked)

        let now = try await e2e.summary("kid", chain: shared.originalTransactionId)
        XCTAssertEqual(now?.state, "revoked")
        XCTAssertEqual(now?.grantsAccess, false)
        XCTAssertFalse(e2e.webhooks.deliveries.contains { $0.kind == "consumableRefunded" })
    }

    func testConsumableRefundSendsAConsumableRefundedWebhookForClawback() async throws {
        let e2e = try await NotificationE2E.start(self)
        let coins = try e2e.buyConsumable(owner: "device-fay")
        try await e2e.claim(coins, account: "fay")

        let refunded = try e2e.simulator.refund(transactionId: coins.transactionId)
        try await e2e.deliver("REFUND", about: refunded)

        try await e2e.eventually("the consumableRefunded webhook arrives") {
            e2e.webhooks.accepted.contains { $0.kind == "consumableRefunded" }
        }
        let hook = try XCTUnwrap(e2e.webhooks.accepted.first { $0.kind == "consumableRefunded" })
        XCTAssertTrue(hook.signatureValid)
        XCTAssertEqual(hook.body["transactionId"]?.stringValue, coins.transactionId)
        XCTAssertEqual(hook.body["productId"]?.stringValue, NotificationE2E.coins)
        XCTAssertEqual(hook.body["notificationType"]?.stringValue, "REFUND")
    }
}
