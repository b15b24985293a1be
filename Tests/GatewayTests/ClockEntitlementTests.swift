import AppStoreSimulator
import Foundation
import IAPCore
import TestSupport
import XCTest

/// Access follows the clock, end to end over real HTTP: the simulator (as Apple) signs subscriptions a few
/// seconds long, and the gateway's answers turn to no access once their dates pass, with no
/// notification to say so; the sweep announces the end through the webhook outbox.
final class ClockEntitlementTests: XCTestCase {
    private let skew = EntitlementAccess.clockSkewAllowanceMillis

    private func start() async throws -> NotificationE2E {
        try await NotificationE2E.start(self) { options in
            options.localOnlyJWS = true
            options.entitlementSweepSeconds = 1
        }
    }

    /// Sleeps until the gateway's clock has reached `periodEnd` less the skew allowance (a few seconds).
    private func waitUntilEnded(_ periodEnd: Int64) async throws {
        let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
        let wait = periodEnd - skew + 100 - nowMs
        XCTAssertLessThan(wait, 6_000, "the test's subscriptions last seconds")
        if wait > 0 { try await Task.sleep(for: .milliseconds(wait)) }
    }

    /// The one `entitlement.changed` webhook the clock made for `chain`, once it arrived.
    private func periodEndedWebhook(_ e2e: NotificationE2E, chain: String) async throws -> WebhookReceiver.Delivery {
        func ended() -> [WebhookReceiver.Delivery] {
            e2e.webhooks.accepted.filter {
                $0.body["notificationType"]?.stringValue == EntitlementAccess.periodEndedNotificationType
                    && $0.body["originalTransactionId"]?.stringValue == chain
            }
        }
        try await e2e.eventually("the sweep's webhook arrives") { !ended().isEmpty }
        XCTAssertEqual(Set(ended().map(\.idempotencyKey)).count, 1, "the end is announced once")
        return try XCTUnwrap(ended().first)
    }

    func testAutoRenewSwitchedOffEndsAccessAtExpiryWithNoNotification() async throws {
        let e2e = try await start()
        let purchase = try e2e.simulator.purchase(PurchaseRequest(
            bundleId: e2e.bundleId, productId: GatewayE2E.monthly, type: .autoRenewable, owner: "device-ivy",
            subscriptionGroupIdentifier: "demo.pro", periodSeconds: 6, price: 4_990))
        let chain = purchase.originalTransactionId
        let expires = try XCTUnwrap(try expiresDate(of: purchase))
        let claimed = try await e2e.gw.verifySigned(purchase.signedTransaction, account: "ivy")
        XCTAssertEqual(claimed.status, 200, claimed.text)
        XCTAssertEqual(claimed.json["verdict"]?.stringValue, "granted")

        let off = try e2e.simulator.changeRenewalPreference(originalTransactionId: chain, autoRenew: false)
        try await e2e.deliver("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", about: off)
        var now = try await e2e.summary("ivy", chain: chain)
        XCTAssertEqual(now?.state, "active")
        XCTAssertEqual(now?.grantsAccess, true)

        try await waitUntilEnded(expires)
        now = try await e2e.summary("ivy", chain: chain)
        XCTAssertEqual(now?.state, "expired", "the GET judges the stored expiry against the clock")
        XCTAssertEqual(now?.grantsAccess, false)

        // The same signed transaction again (checked locally, older than the notification): the
        // answer states access as it is now, not as the stored facts stood when they arrived.
        let again = try await e2e.gw.verifySigned(purchase.signedTransaction, account: "ivy")
        XCTAssertEqual(again.status, 200, again.text)
        XCTAssertEqual(again.json["verdict"]?.stringValue, "notGranted")
        let answered = try XCTUnwrap(again.json["entitlements"]?.arrayValue?.first)
        XCTAssertEqual(answered["state"]?.stringValue, "expired")
        XCTAssertEqual(answered["grantsAccess"], .bool(false))

        let hook = try await periodEndedWebhook(e2e, chain: chain)
        XCTAssertTrue(hook.signatureValid)
        XCTAssertEqual(hook.body["kind"]?.stringValue, "entitlementChanged")
        XCTAssertEqual(hook.body["state"]?.stringValue, "expired")
        XCTAssertEqual(hook.body["grantsAccess"], .bool(false))
        XCTAssertEqual(hook.body["account"]?.stringValue, "ivy")
        XCTAssertEqual(hook.body["occurredAt"], .int(expires))
    }

    func testAGracePeriodEndsInBillingRetryAtItsEndWithNoNotification() async throws {
        let e2e = try await start()
        let purchase = try e2e.subscribe(owner: "device-jo")
        try await e2e.claim(purchase, account: "jo")
        let chain = purchase.originalTransactionId

        let failed = try e2e.simulator.expire(originalTransactionId: chain, intent: 2, billingRetry: true, gracePeriodSeconds: 6)
        try await e2e.deliver("DID_FAIL_TO_RENEW", "GRACE_PERIOD", about: failed)
        var now = try await e2e.summary("jo", chain: chain)
        XCTAssertEqual(now?.state, "gracePeriod")
        XCTAssertEqual(now?.grantsAccess, true, "the demo policy grants access during the grace period")
        let graceEnd = try XCTUnwrap(now?.expiresDate, "in grace the entitlement ends with the grace period")

        try await waitUntilEnded(graceEnd)
        now = try await e2e.summary("jo", chain: chain)
        XCTAssertEqual(now?.state, "billingRetry")
        XCTAssertEqual(now?.grantsAccess, false, "the demo policy does not grant access during billing retry")

        let hook = try await periodEndedWebhook(e2e, chain: chain)
        XCTAssertEqual(hook.body["state"]?.stringValue, "billingRetry")
        XCTAssertEqual(hook.body["grantsAccess"], .bool(false))
        XCTAssertEqual(hook.body["account"]?.stringValue, "jo")
    }
}
