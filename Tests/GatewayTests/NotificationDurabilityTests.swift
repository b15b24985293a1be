import AppStoreSimulator
import Foundation
import IAPCore
import XCTest

/// Nothing lost, nothing applied twice: across a SIGKILLed gateway and a webhook receiver that
/// is down for a while.
final class NotificationDurabilityTests: XCTestCase {
    func testGatewayKilledBetweenReceiptAndProcessingAppliesTheNotificationExactlyOnceAfterRestart() async throws {
        let e2e = try await NotificationE2E.start(self)
        let (config, storage) = try separateGatewayConfig(from: e2e.gw.harness.directory,
                                                          harnessDatabase: e2e.gw.sqlitePath, test: self)
        let first = try GatewayProcess(config: config, environment: storage.processEnvironment)
        addTeardownBlock { first.kill9() }
        var base = "http://127.0.0.1:\(try await first.port())"
        let purchase = try e2e.subscribe(owner: "device-nia")
        let claim = try await e2e.gw.send("POST", "\(base)/v1/apps/\(e2e.bundleId)/verify", body: Array(JSONValue.object([
            "account": "nia", "transactionId": .string(purchase.transactionId)]).jsonText.utf8))
        XCTAssertEqual(claim.status, 200, claim.text)
        let renewal = try e2e.simulator.renew(originalTransactionId: purchase.originalTransactionId)
        let payload = try await e2e.signed("DID_RENEW", about: renewal)
        let uuid = try XCTUnwrap(try jwsPayload(payload)["notificationUUID"]?.stringValue)

        let accepted = try await e2e.gw.send("POST", "\(base)/v1/notifications/\(e2e.bundleId)", body: Array(
            JSONValue.object(["signedPayload": .string(payload)]).jsonText.utf8), apiKey: .some(nil))
        first.kill9()

        XCTAssertEqual(accepted.status, 200, accepted.text)
        XCTAssertEqual(try storage.scalar("SELECT count(*) FROM notification_inbox WHERE notification_id = '\(uuid)'"), "1",
                       "the 200 came after a durable write")
        let processedBeforeKill = try storage.scalar("SELECT CASE WHEN processed_at IS NULL THEN 0 ELSE 1 END FROM notification_inbox WHERE notification_id = '\(uuid)'")
        print("notification processed before SIGKILL: \(processedBeforeKill == "1")")

        let second = try GatewayProcess(config: config, environment: storage.processEnvironment)
        addTeardownBlock { second.kill9() }
        base = "http://127.0.0.1:\(try await second.port())"
        try await e2e.eventually("the restarted gateway processes the inbox") {
            try storage.scalar("SELECT count(*) FROM notification_inbox WHERE processed_at IS NULL") == "0"
        }

        let entitlements = try await e2e.gw.send("GET", "\(base)/v1/apps/\(e2e.bundleId)/accounts/nia/entitlements")
        let rows = entitlements.json["entitlements"]?.arrayValue ?? []
        XCTAssertEqual(rows.count, 1, entitlements.text)
        XCTAssertEqual(rows.first?["expiresDate"], try expiresDate(of: renewal).map(JSONValue.int))
        XCTAssertEqual(try storage.scalar("SELECT count(*) FROM notification_inbox WHERE notification_id = '\(uuid)'"), "1")
        XCTAssertEqual(try storage.scalar("SELECT count(*) FROM webhook_outbox WHERE idempotency_key LIKE '%:\(uuid)'"), "1",
                       "one outbox event for the notification")
        let key = "entitlementChanged:\(purchase.originalTransactionId.utf8.count):\(purchase.originalTransactionId):\(uuid)"
        try await e2e.eventually("the restarted gateway delivers its webhook") {
            e2e.webhooks.accepted.contains { $0.idempotencyKey == key }
        }
        XCTAssertEqual(e2e.webhooks.accepted.filter { $0.idempotencyKey == key }.count, 1)
    }

    func testWebhookReceiverDownForAWhileStillGetsEveryEventOncePerIdempotencyKey() async throws {
        let e2e = try await NotificationE2E.start(self, failFirstWebhooks: 2)
        let subscription = try e2e.subscribe(owner: "device-oz")
        try await e2e.claim(subscription, account: "oz")
        let coins = try e2e.buyConsumable(owner: "device-oz")
        try await e2e.claim(coins, account: "oz")

        try await e2e.deliver("SUBSCRIBED", "INITIAL_BUY", about: subscription)
        try await e2e.deliver("DID_RENEW", about: try e2e.simulator.renew(originalTransactionId: subscription.originalTransactionId))
        try await e2e.deliver("REFUND", about: try e2e.simulator.refund(transactionId: coins.transactionId))

        try await e2e.eventually("the outbox is delivered", seconds: 20) { try e2e.ledger.outboxDepth() == 0 }
        let outboxKeys = Set(try TestStorage(backend: .sqlite(path: e2e.gw.sqlitePath))
            .rows("SELECT idempotency_key FROM webhook_outbox").map { $0[0] })
        let deliveries = e2e.webhooks.deliveries
        XCTAssertEqual(deliveries.filter { $0.answered == 503 }.count, 2, "the receiver was down for two deliveries")
        XCTAssertTrue(deliveries.allSatisfy(\.signatureValid), "every delivery is signed with the app's webhook secret")
        let accepted = e2e.webhooks.accepted.map(\.idempotencyKey)
        XCTAssertEqual(Set(accepted), outboxKeys)
        XCTAssertEqual(accepted.count, outboxKeys.count, "each key accepted exactly once: \(accepted)")
        XCTAssertTrue(e2e.webhooks.accepted.contains { $0.kind == "consumableRefunded" })
        XCTAssertGreaterThanOrEqual(outboxKeys.count, 3)
    }
}
