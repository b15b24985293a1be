import AppStoreSimulator
import Foundation
@testable import Gateway
import IAPCore
@testable import Ledger
import TestSupport
import XCTest

/// Issue 13 items 1 and 7 end to end, over real HTTP against the simulator: today's fields reach
/// the verify answer and the webhook, and Apple (which no longer retries a 4xx) hears a 4xx only
/// for what is forged, foreign or malformed.
final class AppStore2026Tests: XCTestCase {
    // MARK: Item 1: every field of today's payloads

    func testACommitmentPlanShowsTheCommitmentEndBesideTheMonthlyExpiry() async throws {
        let e2e = try await NotificationE2E.start(self)
        var request = PurchaseRequest(bundleId: e2e.bundleId, productId: GatewayE2E.monthly, type: .autoRenewable,
                                      owner: "device-commit", subscriptionGroupIdentifier: "demo.pro", price: 4_990)
        request.commitmentPeriods = 12
        let purchase = try e2e.simulator.purchase(request)

        let answer = try await e2e.gw.verifyTransactionId(purchase.transactionId, account: "cora")
        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.json["mappingVersion"], "serverAPI/v2")
        let transaction = try XCTUnwrap(answer.json["transactions"]?.arrayValue?.first)
        XCTAssertEqual(transaction["billingPlanType"], "MONTHLY")
        XCTAssertEqual(transaction["commitmentInfo"]?["totalBillingPeriods"], .int(12))
        XCTAssertEqual(transaction["commitmentInfo"]?["billingPeriodNumber"], .int(1))
        XCTAssertNotNil(transaction["appTransactionId"]?.stringValue)
        let renewal = try XCTUnwrap(answer.json["renewals"]?.arrayValue?.first)
        XCTAssertEqual(renewal["renewalBillingPlanType"], "MONTHLY")
        XCTAssertEqual(renewal["commitmentInfo"]?["commitmentRenewalBillingPlanType"], "MONTHLY")

        let entitlement = try XCTUnwrap(answer.json["entitlements"]?.arrayValue?.first)
        let monthlyEnd = try XCTUnwrap(try expiresDate(of: purchase))
        guard case .int(let commitmentEnd)? = transaction["commitmentInfo"]?["commitmentExpiresDate"] else {
            return XCTFail("commitmentExpiresDate: \(transaction)")
        }
        XCTAssertEqual(entitlement["expiresDate"], .int(monthlyEnd), "access follows the month paid for")
        XCTAssertEqual(entitlement["commitmentExpiresDate"], .int(commitmentEnd))
        XCTAssertGreaterThan(commitmentEnd, monthlyEnd)
        XCTAssertEqual(entitlement["grantsAccess"], .bool(true))

        // The stored entitlement keeps it: GET shows the same commitment end beside the monthly expiry.
        let stored = try await e2e.entitlement("cora", chain: purchase.originalTransactionId)
        XCTAssertEqual(stored?["expiresDate"], .int(monthlyEnd))
        XCTAssertEqual(stored?["commitmentExpiresDate"], .int(commitmentEnd))

        // A renewal's notification moves the month on and keeps the commitment it belongs to.
        let renewed = try e2e.simulator.renew(originalTransactionId: purchase.originalTransactionId)
        try await e2e.deliver("DID_RENEW", about: renewed)
        let afterRenewal = try await e2e.entitlement("cora", chain: purchase.originalTransactionId)
        XCTAssertEqual(afterRenewal?["expiresDate"], .int(try XCTUnwrap(try expiresDate(of: renewed))))
        XCTAssertEqual(afterRenewal?["commitmentExpiresDate"], .int(commitmentEnd))
    }

    /// Decided (README, "Refunds"): a prorated refund ends access at `revocationDate` exactly like a
    /// full one; its type and percentage travel to the webhook so the backend can be generous itself.
    func testAProratedRefundEndsAccessAndItsPercentageReachesTheWebhook() async throws {
        let e2e = try await NotificationE2E.start(self)
        let purchase = try e2e.subscribe(owner: "device-pria")
        try await e2e.claim(purchase, account: "pria")
        let refunded = try e2e.simulator.refundProrated(transactionId: purchase.transactionId, percentage: 45_000)
        let payload = try await e2e.deliver("REFUND", about: refunded)
        let uuid = try XCTUnwrap(try jwsPayload(payload)["notificationUUID"]?.stringValue)

        let now = try await e2e.summary("pria", chain: purchase.originalTransactionId)
        XCTAssertEqual(now?.state, "refunded")
        XCTAssertEqual(now?.grantsAccess, false)
        var delivered: WebhookReceiver.Delivery?
        try await e2e.eventually("the refund's webhook is delivered") {
            delivered = e2e.webhooks.accepted.first { $0.idempotencyKey.hasSuffix(uuid) && $0.kind == "entitlementChanged" }
            return delivered != nil
        }
        let body = try XCTUnwrap(delivered).body
        XCTAssertEqual(body["state"], "refunded")
        XCTAssertEqual(body["grantsAccess"], .bool(false))
        XCTAssertEqual(body["revocationType"], "REFUND_PRORATED")
        XCTAssertEqual(body["revocationPercentage"], .int(45_000))
    }

    // MARK: Item 7: notifications Apple no longer retries

    func testRescindConsentWithAppDataIsStoredAnsweredAndForwarded() async throws {
        let e2e = try await NotificationE2E.start(self)
        let payload = try await e2e.simulator.sendAppNotification(type: "RESCIND_CONSENT", bundleId: e2e.bundleId,
                                                                  owner: "device-rhea", to: nil)
        XCTAssertNotNil(try jwsPayload(payload)["appData"]?["signedAppTransactionInfo"])
        let event = try await acceptedStoredAndForwarded(e2e, payload)
        XCTAssertEqual(event.kind, "consentRescinded")
        XCTAssertEqual(event.body["notificationType"], "RESCIND_CONSENT")
        XCTAssertNil(event.body["originalTransactionId"], "it names no purchase")
    }

    func testAGenuineNotificationOfATypeNotYetKnownIsStoredAnsweredAndForwarded() async throws {
        let e2e = try await NotificationE2E.start(self)
        let payload = try await e2e.simulator.sendAppNotification(type: "APP_MOVED_TO_ORBIT", subtype: "GEOSTATIONARY",
                                                                  bundleId: e2e.bundleId, owner: "device-orla", to: nil)
        let event = try await acceptedStoredAndForwarded(e2e, payload)
        let counted = try e2e.ledger.unknownNotificationCounts().filter { $0.bundleId == e2e.bundleId }
        XCTAssertEqual(counted.map(\.notificationType), ["APP_MOVED_TO_ORBIT"])
        XCTAssertEqual(event.kind, "unknownNotification")
        XCTAssertEqual(event.body["notificationType"], "APP_MOVED_TO_ORBIT")
        XCTAssertEqual(event.body["subtype"], "GEOSTATIONARY")
    }

    /// The table of answers (README, "Notification answers"): 4xx only for what is forged, foreign
    /// or malformed; storage trouble is a 503 Apple will retry.
    func testOnlyForgedForeignOrMalformedBodiesAreAnswered4xxAndStorageTroubleIs503() async throws {
        let e2e = try await NotificationE2E.start(self)
        let purchase = try e2e.subscribe(owner: "device-tabu")
        let genuine = try await e2e.signed("DID_RENEW", about: purchase)

        var forged = Array(genuine.utf8)
        let last = forged.count - 2  // a signature byte, keeping the base64url canonical
        forged[last] = forged[last] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        let forgedAnswer = try await e2e.post(signedPayload: String(decoding: forged, as: UTF8.self))
        XCTAssertEqual(forgedAnswer.status, 422, forgedAnswer.text)

        let foreign = try await e2e.gw.send("POST", "\(e2e.gw.harness.gatewayURL)/v1/notifications/com.example.other",
                                            body: Array(JSONValue.object(["signedPayload": .string(genuine)]).jsonText.utf8),
                                            apiKey: .some(nil))
        XCTAssertEqual(foreign.status, 404, foreign.text)
        let malformed = try await e2e.postRaw(Array(#"{"signedPayload": 7}"#.utf8))
        XCTAssertEqual(malformed.status, 400, malformed.text)

        let database = try XCTUnwrap(e2e.gw.harness.parts.storedLedger.database as? SQLiteDatabase)
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.executeScript("PRAGMA max_page_count = 1", operation: "configure")
        }
        defer {
            try? database.withConnection { (connection) throws(VerificationError) in
                try connection.executeScript("PRAGMA max_page_count = 1073741823", operation: "configure")
            }
        }
        var full: GatewayAnswer?
        for _ in 0..<200 where full == nil {
            let answer = try await e2e.post(signedPayload: try await e2e.signed("DID_RENEW", about: purchase))
            if answer.status != 200 { full = answer }
        }
        let refused = try XCTUnwrap(full, "the database filled up")
        XCTAssertEqual(refused.status, 503, refused.text)
        XCTAssertEqual(refused.errorCode, "STORAGE_UNAVAILABLE")
        XCTAssertNotNil(refused.headers["retry-after"])
    }

    /// Posts `payload`, expects 200 `accepted`, and returns the webhook delivery it led to once the
    /// inbox holds it and has drained.
    private func acceptedStoredAndForwarded(_ e2e: NotificationE2E, _ payload: String) async throws -> WebhookReceiver.Delivery {
        let uuid = try XCTUnwrap(try jwsPayload(payload)["notificationUUID"]?.stringValue)
        let answer = try await e2e.post(signedPayload: payload)
        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.json["status"], "accepted")
        try await e2e.waitUntilDrained()
        XCTAssertTrue(try e2e.inboxIds().contains(uuid), "stored")
        var found: WebhookReceiver.Delivery?
        try await e2e.eventually("the notification's webhook is delivered") {
            found = e2e.webhooks.accepted.first { $0.idempotencyKey.hasSuffix(":" + uuid) }
            return found != nil
        }
        return try XCTUnwrap(found)
    }
}
