import AppStoreSimulator
import Foundation
@testable import Gateway
import IAPCore
import Ledger
import TestSupport
import XCTest

/// `notifications replay`: stored notifications applied again through the state machine change
/// nothing that was already right; raw-body retention drops bodies but keeps the rows.
final class ReplayTests: XCTestCase {
    func testReplayingEveryNotificationSinceAnHourAgoLeavesTheSameState() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")
        _ = try await gw.verifyTransactionId(purchase.transactionId, account: "alice")
        try await gw.simulator.sendNotification(type: "SUBSCRIBED", subtype: "INITIAL_BUY", purchase: purchase,
                                                to: gw.harness.notificationURL)
        let renewal = try gw.simulator.renew(originalTransactionId: purchase.originalTransactionId)
        try await gw.simulator.sendNotification(type: "DID_RENEW", purchase: renewal, to: gw.harness.notificationURL)
        let refunded = try gw.simulator.refund(transactionId: renewal.transactionId)
        try await gw.simulator.sendNotification(type: "REFUND", purchase: refunded, to: gw.harness.notificationURL)
        try await gw.waitUntilInboxIsDrained()
        let ledger = gw.harness.parts.storedLedger
        let stateBefore = try ledger.subscriptionState(bundleId: gw.bundleId, originalTransactionId: purchase.originalTransactionId)
        let entitlementsBefore = try await gw.entitlements("alice")
        let outboxBefore = try ledger.outboxDepth()

        let since = Int64(Date().timeIntervalSince1970 * 1000) - 3_600_000
        let (reset, report) = try await gw.harness.parts.notificationMaintenance().replay(since: since, bundleId: gw.bundleId)
        try await gw.waitUntilInboxIsDrained()

        XCTAssertEqual(reset, 3)
        XCTAssertEqual(report.failed, 0)
        XCTAssertEqual(stateBefore?.state, .refunded)
        XCTAssertEqual(try ledger.subscriptionState(bundleId: gw.bundleId, originalTransactionId: purchase.originalTransactionId),
                       stateBefore)
        let entitlementsAfter = try await gw.entitlements("alice")
        XCTAssertEqual(entitlementsAfter, entitlementsBefore)
        XCTAssertEqual(entitlementsAfter.first?["state"]?.stringValue, "refunded")
        XCTAssertEqual(try ledger.outboxDepth(), outboxBefore, "a replay queues no webhook twice")
    }

    func testReplayOfAnUnknownAppIsRefused() async throws {
        let gw = try await GatewayE2E.start(self)

        do {
            _ = try await gw.harness.parts.notificationMaintenance().replay(since: 0, bundleId: "com.example.other")
            XCTFail("replayed an unknown app")
        } catch {
            XCTAssertEqual(error.code, .unknownApp)
        }
    }

    func testPurgeDropsOnlyRawBodiesOlderThanTheRetentionAndKeepsTheRows() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")
        try await gw.simulator.sendNotification(type: "SUBSCRIBED", subtype: "INITIAL_BUY", purchase: purchase,
                                                to: gw.harness.notificationURL)
        try await gw.waitUntilInboxIsDrained()
        let ledger = gw.harness.parts.storedLedger

        let keptByRetention = try await gw.harness.parts.notificationMaintenance().purge(olderThanDays: 30)
        // Received now: a body older than "now + 1 ms" is every body there is.
        let purged = try await ReconciliationSchedule.purge(gw.harness.parts.ledger, days: 0, now: Int64(Date().timeIntervalSince1970 * 1000) + 1)

        XCTAssertEqual(keptByRetention, 0)
        XCTAssertEqual(purged, 1)
        let entries = try ledger.inboxEntries(bundleId: gw.bundleId, since: 0, limit: 10)
        XCTAssertEqual(entries.count, 1)
        XCTAssertEqual(entries.first?.rawBody, Data())
        XCTAssertEqual(entries.first?.notificationType, "SUBSCRIBED")
    }

    func testPurgeRefusesARetentionOutsideOneToThreeThousandSixHundredFiftyDays() async throws {
        let gw = try await GatewayE2E.start(self)

        do {
            _ = try await gw.harness.parts.notificationMaintenance().purge(olderThanDays: 0)
            XCTFail("purged with a retention of 0 days")
        } catch {
            XCTAssertEqual(error.code, .invalidConfiguration)
        }
    }
}
