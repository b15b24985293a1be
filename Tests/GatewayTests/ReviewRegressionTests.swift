import AppStoreSimulator
import AppleTrust
@testable import Gateway
import Foundation
@testable import IAPConfig
@testable import IAPCore
import Ledger
import TestSupport
import XCTest

/// Regressions for what a review of the gateway found: refunds must never be granted back, and
/// offers must not be mistaken for wrong prices.
final class ReviewRegressionTests: XCTestCase {
    /// Waits (bounded) until the gateway's inbox has processed everything it holds.
    private func drained(_ gw: GatewayE2E) async throws {
        let ledger = try SQLLedger(storage: gw.sqlitePath)
        for _ in 0..<100 {
            if try ledger.inboxDepth().pending == 0 { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        XCTFail("the inbox was not drained")
    }

    func testAnOldSignedTransactionReplayedAfterItsRefundNotificationGrantsNothing() async throws {
        let gw = try await GatewayE2E.start(self) { $0.localOnlyJWS = true }
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")
        let first = try await gw.verifySigned(purchase.signedTransaction, account: "bob")
        XCTAssertEqual(first.status, 200, first.text)

        let refunded = try gw.simulator.refund(transactionId: purchase.transactionId)
        _ = try await gw.simulator.sendNotification(type: "REFUND", subtype: nil, purchase: refunded,
                                                    to: gw.harness.notificationURL)
        try await drained(gw)

        let replay = try await gw.verifySigned(purchase.signedTransaction, account: "bob")
        XCTAssertEqual(replay.status, 422, replay.text)
        XCTAssertEqual(replay.errorCode, "TRANSACTION_REVOKED")
        let entitlements = try await gw.entitlements("bob")
        XCTAssertEqual(entitlements.first?["state"], "refunded")
        XCTAssertEqual(entitlements.first?["grantsAccess"], .bool(false))
    }

    func testARefundedPurchaseInAReceiptIsAnsweredAsRevokedNeverAsGranted() async throws {
        let gw = try await GatewayE2E.start(self) { $0.nonceRequired = false }
        let coins = try gw.simulator.purchase(PurchaseRequest(
            bundleId: gw.bundleId, productId: "com.example.demo.coins100", type: .consumable, owner: "device-carol", price: 990))
        _ = try gw.buy(GatewayE2E.removeAds, owner: "device-carol")
        _ = try gw.simulator.refund(transactionId: coins.transactionId)
        let receipt = try gw.simulator.receipt(owner: "device-carol", bundleId: gw.bundleId)

        let answer = try await gw.verifyReceipt(receipt, account: "carol")

        XCTAssertEqual(answer.status, 200, answer.text)
        let granted = (answer.json["newlyGranted"]?.arrayValue ?? []).compactMap(\.stringValue)
        XCTAssertFalse(granted.contains(coins.transactionId), answer.text)
        XCTAssertEqual(granted.count, 1, answer.text)
        XCTAssertEqual(answer.json["revoked"], .array([.string(coins.transactionId)]))
    }

    func testAFreeTrialIsNotAWrongPrice() async throws {
        let gw = try await GatewayE2E.start(self)
        let trial = try gw.simulator.purchase(PurchaseRequest(
            bundleId: gw.bundleId, productId: GatewayE2E.monthly, type: .autoRenewable, owner: "device-dan",
            subscriptionGroupIdentifier: "demo.pro", price: 0, offer: .freeTrial))

        let answer = try await gw.verifyTransactionId(trial.transactionId, account: "dan")

        XCTAssertEqual(answer.status, 200, answer.text)
    }
}

final class V1NotificationTrustTests: XCTestCase {
    /// A V1 body is signed by nothing: whoever knows the shared secret could write any dates into
    /// it. The gateway applies Apple's answer about the body's receipt, never the body's own facts,
    /// and keeps neither the password nor the receipt in the inbox.
    func testAForgedV1BodyCannotExtendASubscription() async throws {
        let gw = try await GatewayE2E.start(self) { $0.nonceRequired = false }
        let purchase = try gw.buy(owner: "device-erin")
        let claimed = try await gw.verifyReceipt(purchase.receiptBase64, account: "erin")
        XCTAssertEqual(claimed.status, 200, claimed.text)
        let expiresBefore = try await gw.entitlements("erin").first?["expiresDate"]

        let forgedExpiry = "4102444800000"  // 2100-01-01
        let body: JSONValue = .object([
            "notification_type": "DID_RENEW", "password": .string(gw.harness.sharedSecret), "bid": .string(gw.bundleId),
            "environment": "PROD",
            "unified_receipt": .object([
                "status": 0, "environment": "Production", "latest_receipt": .string(purchase.receiptBase64),
                "latest_receipt_info": .array([.object([
                    "transaction_id": "999999", "original_transaction_id": .string(purchase.originalTransactionId),
                    "product_id": .string(GatewayE2E.monthly), "purchase_date_ms": "4100000000000",
                    "expires_date_ms": .string(forgedExpiry), "quantity": "1"])]),
            ]),
        ])
        let answer = try await gw.send("POST", gw.harness.notificationURL, body: Array(body.jsonText.utf8), apiKey: .some(nil))
        XCTAssertEqual(answer.status, 200, answer.text)

        let ledger = try SQLLedger(storage: gw.sqlitePath)
        for _ in 0..<100 where try ledger.inboxDepth().pending > 0 { try await Task.sleep(for: .milliseconds(50)) }
        let after = try await gw.entitlements("erin").first
        XCTAssertEqual(after?["expiresDate"], expiresBefore)
        XCTAssertNotEqual(after?["expiresDate"], .int(Int64(forgedExpiry)!))
        let stored = try ledger.inboxEntries(bundleId: gw.bundleId, since: 0, limit: 10)
        XCTAssertEqual(stored.count, 1)
        let kept = String(decoding: stored[0].rawBody, as: UTF8.self)
        XCTAssertFalse(kept.contains(gw.harness.sharedSecret))
        XCTAssertFalse(kept.contains(purchase.receiptBase64.prefix(40)))
    }

    func testAV1NotificationWithoutItsBundleIsRefused() async throws {
        let gw = try await GatewayE2E.start(self)
        let body: JSONValue = .object(["notification_type": "DID_RENEW", "password": .string(gw.harness.sharedSecret),
                                       "environment": "PROD", "unified_receipt": .object(["latest_receipt": "x"])])
        let answer = try await gw.send("POST", gw.harness.notificationURL, body: Array(body.jsonText.utf8), apiKey: .some(nil))
        // The body is JSON the route reads; what it lacks is content of the notification: 422, with
        // the code a missing bundle id gets on every path (it is not shown to be this app's).
        XCTAssertEqual(answer.status, 422, answer.text)
        XCTAssertEqual(answer.errorCode, "BUNDLE_ID_MISMATCH")
    }
}

final class WebhookBodyTests: XCTestCase {
    func testAWebhookNamesTheAccountThatOwnsTheChainAndIsSignedOverTimestampAndBody() throws {
        let event = WebhookEvent(kind: .entitlementChanged, idempotencyKey: "k1", bundleId: "com.example.demo",
                                 originalTransactionId: "100", transactionId: "101", productId: "p", state: .refunded,
                                 expiresDate: nil, notificationType: "REFUND", subtype: nil, occurredAt: 5)
        let policy = AppPolicy.GracePeriodPolicy(grantDuringGracePeriod: true, grantDuringBillingRetry: false)
        let body = WebhookDispatcher.body(event, account: "alice", policy: policy)
        let json = try StrictJSON().parse(body)
        XCTAssertEqual(json["account"], "alice")
        XCTAssertEqual(json["state"], "refunded")
        XCTAssertEqual(json["grantsAccess"], .bool(false))
        XCTAssertEqual(json["idempotencyKey"], "k1")
        XCTAssertNil(try StrictJSON().parse(WebhookDispatcher.body(event, account: nil, policy: policy))["account"])
        XCTAssertEqual(WebhookDispatcher.signature(secret: "s", timestamp: "10", body: body),
                       "sha256=" + HMACSHA256.hex(key: Array("s".utf8), message: Array("10.\(body)".utf8)))
    }
}

final class MetricsGaugeTests: XCTestCase {
    func testMetricsExposeInboxOutboxAndComparisonGauges() async throws {
        let gw = try await GatewayE2E.start(self)
        // Two signed transactions with one chain: the second verification is a cache hit.
        for owner in ["device-m1", "device-m2"] {
            let purchase = try gw.buy(GatewayE2E.removeAds, owner: owner)
            let verified = try await gw.verifySigned(purchase.signedTransaction, account: String(owner.dropFirst(7)))
            XCTAssertEqual(verified.status, 200, verified.text)
        }
        let answer = try await gw.get("/metrics")
        XCTAssertTrue(answer.text.contains("iapgw_chain_cache_lookups_total{result=\"miss\"} 1"), answer.text)
        XCTAssertFalse(answer.text.contains("iapgw_chain_cache_lookups_total{result=\"hit\"} 0\n"), answer.text)
        XCTAssertEqual(answer.status, 200)
        for line in ["iapgw_inbox_entries{state=\"pending\"} 0", "iapgw_inbox_entries{state=\"parked\"} 0",
                     "iapgw_outbox_depth 0", "iapgw_comparisons{app=\"\(gw.bundleId)\",outcome=\"agreed\"} 0"] {
            XCTAssertTrue(answer.text.contains(line), "missing \(line) in:\n\(answer.text)")
        }
    }
}
