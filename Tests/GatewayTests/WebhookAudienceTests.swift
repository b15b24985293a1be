import AppStoreSimulator
import Foundation
@testable import Gateway
@testable import IAPCore
import Ledger
import TestSupport
import XCTest

/// An app without a webhook receiver writes no outbox rows: not from a notification, not from the
/// clock ending a period, not through `enqueueWebhooks`; what the notifications mean otherwise (the
/// entitlement, a consumption request Apple waits on) is stored as before. An app with a receiver
/// gets every one of those events, delivered.
final class WebhookAudienceTests: XCTestCase {
    func testAnAppWithoutAReceiverWritesNoWebhookRowsAndKeepsEverythingElse() async throws {
        let gw = try await GatewayE2E.start(self)
        XCTAssertNil(gw.harness.parts.apps[gw.bundleId]?.webhook, "the demo app has no receiver unless one is given")

        let (coins, ended, enqueued) = try await notifyAndEndTheSubscription(gw)

        let outbox = TestStorage(backend: .sqlite(path: gw.sqlitePath))
        XCTAssertEqual(try gw.harness.parts.storedLedger.pendingConsumptionRequests(notBefore: 0, limit: 10)
            .map(\.transactionId), [coins.transactionId], "Apple's consumption request is kept without a receiver")
        XCTAssertEqual(ended, 1, "the clock still ends the subscription's period")
        XCTAssertEqual(enqueued, 0)
        XCTAssertEqual(try outbox.scalar("SELECT count(*) FROM webhook_outbox"), "0", "no row, delivered or not")
    }

    func testAnAppWithAReceiverGetsEveryEventDelivered() async throws {
        let e2e = try await NotificationE2E.start(self)

        let (_, ended, enqueued) = try await notifyAndEndTheSubscription(e2e.gw)

        let outbox = TestStorage(backend: .sqlite(path: e2e.gw.sqlitePath))
        let stored = try outbox.rows("SELECT idempotency_key FROM webhook_outbox").map { $0[0] }
        // The clock's event is due when the clock said the period ended (far ahead): not sent yet.
        let dueNow = stored.filter { !$0.contains(":clock:") }
        XCTAssertEqual(ended, 1)
        XCTAssertEqual(enqueued, 1)
        XCTAssertEqual(stored.count, 4, "the notification's two events (entitlement, consumption), the clock's, the direct one")
        XCTAssertEqual(dueNow.count, 3)
        try await e2e.eventually("the receiver has every event due now", seconds: 10) {
            Set(dueNow).isSubset(of: Set(e2e.webhooks.accepted.map(\.idempotencyKey)))
        }
    }

    /// Claims a subscription and a consumable, has Apple ask for consumption information, lets the
    /// clock end the subscription's period and queues one event directly: every way an event is made.
    private func notifyAndEndTheSubscription(_ gw: GatewayE2E) async throws
        -> (coins: SimulatedPurchase, ended: Int, enqueued: Int) {
        let ledger = gw.harness.parts.storedLedger
        let subscription = try gw.buy(GatewayE2E.monthly, owner: "device-nia")
        let claimed = try await gw.verifyTransactionId(subscription.transactionId, account: "nia")
        XCTAssertEqual(claimed.status, 200, claimed.text)
        let coins = try gw.simulator.purchase(PurchaseRequest(
            bundleId: gw.bundleId, productId: "com.example.demo.coins100", type: .consumable, owner: "device-nia", price: 990))
        let coinsClaimed = try await gw.verifyTransactionId(coins.transactionId, account: "nia")
        XCTAssertEqual(coinsClaimed.status, 200, coinsClaimed.text)
        try await gw.simulator.sendNotification(type: "CONSUMPTION_REQUEST", purchase: coins, to: gw.harness.notificationURL)
        try await gw.waitUntilInboxIsDrained()
        let depth = try ledger.inboxDepth()
        XCTAssertEqual([depth.pending, depth.parked], [0, 0])
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let ended = try ledger.advanceEntitlementsByClock(now: now + 400 * 86_400_000, limit: 10)
        let enqueued = try ledger.enqueueWebhooks([WebhookEvent(
            kind: .test, idempotencyKey: "k-direct", bundleId: gw.bundleId, originalTransactionId: nil, transactionId: nil,
            productId: nil, state: nil, expiresDate: nil, notificationType: "TEST", subtype: nil, occurredAt: now)], now: now)
        return (coins, ended, enqueued)
    }
}
