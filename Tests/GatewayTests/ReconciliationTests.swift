import Adapters
import AppStoreSimulator
import Foundation
@testable import Gateway
import IAPConfig
import IAPCore
import Ledger
import TestSupport
import XCTest

/// Reconciliation over the simulator and a running gateway (real HTTP on loopback): lost
/// notifications come back from Get Notification History, silent expiries from Get All
/// Subscription Statuses, and legacy-only apps follow their re-verified receipts.
final class ReconciliationTests: XCTestCase {
    func testRefundNotificationLostInTransitIsRestoredFromNotificationHistory() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")
        let claimed = try await gw.verifyTransactionId(purchase.transactionId, account: "alice")
        XCTAssertEqual(claimed.status, 200, claimed.text)
        // Delivered: already in the inbox, so reading it back from history must change nothing.
        try await gw.simulator.sendNotification(type: "SUBSCRIBED", subtype: "INITIAL_BUY", purchase: purchase,
                                                to: gw.harness.notificationURL)
        let refunded = try gw.simulator.refund(transactionId: purchase.transactionId)
        // Signed and recorded in Apple's history, but never reaches the gateway.
        try await gw.simulator.sendNotification(type: "REFUND", purchase: refunded, to: nil)
        try await gw.waitUntilInboxIsDrained()
        let before = try await gw.entitlements("alice")
        XCTAssertEqual(before.first?["state"]?.stringValue, "active")

        let report = try await runPass(gw.harness.parts.reconciler())
        try await gw.waitUntilInboxIsDrained()

        XCTAssertEqual(report.failures, [])
        XCTAssertEqual(report.historyRead, 2)
        XCTAssertEqual(report.historyEnqueued, 1, "the delivered notification is a duplicate; the lost one fills the gap")
        let after = try await gw.entitlements("alice")
        XCTAssertEqual(after.first?["state"]?.stringValue, "refunded")
        XCTAssertEqual(after.first?["grantsAccess"], .bool(false))
    }

    func testSecondPassReadsNothingNewAndEnqueuesNothing() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")
        _ = try await gw.verifyTransactionId(purchase.transactionId, account: "alice")
        try await gw.simulator.sendNotification(type: "SUBSCRIBED", subtype: "INITIAL_BUY", purchase: purchase, to: nil)
        let reconciler = try gw.harness.parts.reconciler()

        let first = try await runPass(reconciler)
        let second = try await runPass(reconciler)

        XCTAssertEqual(first.historyEnqueued, 1)
        XCTAssertEqual(second.historyRead, 1, "the overlap re-reads the last window")
        XCTAssertEqual(second.historyEnqueued, 0)
    }

    func testSubscriptionThatExpiredWithoutAnyNotificationIsMarkedExpiredFromItsStatus() async throws {
        let gw = try await GatewayE2E.start(self)
        // Ends within the next hour as far as the gateway knows: a chain reconciliation re-reads.
        let nearExpiry = try gw.simulator.purchase(PurchaseRequest(
            bundleId: gw.bundleId, productId: GatewayE2E.monthly, type: .autoRenewable, owner: "device-bob",
            subscriptionGroupIdentifier: "demo.pro", periodSeconds: 1_800, price: 4_990))
        let farFromExpiry = try gw.buy(owner: "device-carol")
        let bob = try await gw.verifyTransactionId(nearExpiry.transactionId, account: "bob")
        let carol = try await gw.verifyTransactionId(farFromExpiry.transactionId, account: "carol")
        XCTAssertEqual(bob.status, 200, bob.text)
        XCTAssertEqual(carol.status, 200, carol.text)
        _ = try gw.simulator.expire(originalTransactionId: nearExpiry.originalTransactionId)

        let report = try await runPass(gw.harness.parts.reconciler())
        try await gw.waitUntilInboxIsDrained()

        XCTAssertEqual(report.failures, [])
        XCTAssertEqual(report.statusChainsRead, 1, "only the chain near expiry is re-read")
        XCTAssertEqual(report.statusEventsEnqueued, 1)
        let bobs = try await gw.entitlements("bob")
        XCTAssertEqual(bobs.first?["state"]?.stringValue, "expired")
        XCTAssertEqual(bobs.first?["grantsAccess"], .bool(false))
        let carols = try await gw.entitlements("carol")
        XCTAssertEqual(carols.first?["state"]?.stringValue, "active")
    }

    func testLegacyOnlyAppFollowsItsStoredReceiptReverifiedAfterARefund() async throws {
        let gw = try await GatewayE2E.start(self)
        let (apps, claimed) = try await gw.legacyOnlySubscriber(owner: "device-dora", account: "dora")
        let transactionId = try XCTUnwrap(claimed.json["transactions"]?.arrayValue?.first?["transactionId"]?.stringValue)
        let reconciler = try gw.harness.parts.reconciler(apps: apps)

        let unchanged = try await runPass(reconciler)
        try await gw.waitUntilInboxIsDrained()
        let stillActive = try await gw.entitlements("dora")
        _ = try gw.simulator.refund(transactionId: transactionId)
        let afterRefund = try await runPass(reconciler)
        try await gw.waitUntilInboxIsDrained()

        XCTAssertEqual(unchanged.failures, [])
        XCTAssertEqual(unchanged.historyRead, 0, "a legacy-only app has no notification history to read")
        XCTAssertEqual(unchanged.receiptsReverified, 1)
        XCTAssertEqual(stillActive.first?["state"]?.stringValue, "active")
        XCTAssertEqual(afterRefund.failures, [])
        XCTAssertEqual(afterRefund.receiptEventsEnqueued, 1)
        let entitlements = try await gw.entitlements("dora")
        XCTAssertEqual(entitlements.first?["state"]?.stringValue, "refunded")
        XCTAssertEqual(entitlements.first?["grantsAccess"], .bool(false))
    }

    func testOnlyOnePassRunsAtATime() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")
        try await gw.simulator.sendNotification(type: "SUBSCRIBED", subtype: "INITIAL_BUY", purchase: purchase, to: nil)
        // Holds the first pass inside the history call while the second one starts.
        gw.simulator.faults.setLatency(milliseconds: 300)
        let reconciler = try gw.harness.parts.reconciler()

        async let first = reconciler.reconcile()
        async let second = reconciler.reconcile()
        let results = await [first, second]

        XCTAssertEqual(results.compactMap { $0 }.count, 1, "exactly one pass ran")
    }

    func testPassThatLosesItsLeaseStopsAndLeavesTheNewHoldersLeaseAlone() async throws {
        let capture = LogCapture()
        let gw = try await GatewayE2E.start(self)
        let parts = gw.harness.parts
        let ledger = parts.storedLedger
        let purchase = try gw.buy(owner: "device-alice")
        try await gw.simulator.sendNotification(type: "SUBSCRIBED", subtype: "INITIAL_BUY", purchase: purchase, to: nil)
        gw.simulator.faults.setLatency(milliseconds: 400)
        var options = Reconciler.Options()
        options.leaseMillis = 300
        let reconciler = try parts.reconciler(options: options, logger: capture.logger)

        async let pass = reconciler.reconcile()
        try await Task.sleep(for: .milliseconds(50))
        // Another instance takes over (as if this one had stalled past its lease).
        try ledger.releaseLease("reconciliation", holder: reconciler.leaseHolder)
        XCTAssertTrue(try ledger.acquireLease("reconciliation", holder: "other-instance", now: parts.now(),
                                              ttlMillis: 60_000))
        _ = await pass

        let events = capture.captured.compactMap { try? StrictJSON().parse(Array($0.utf8))["event"]?.stringValue }
        XCTAssertTrue(events.contains("reconciliation_lease_lost"), "\(events)")
        XCTAssertTrue(events.contains("reconciliation_pass_abandoned"), "\(events)")
        XCTAssertFalse(events.contains("reconciliation_pass"), "the pass did not run to its end")
        XCTAssertFalse(try ledger.acquireLease("reconciliation", holder: "third-instance", now: parts.now(),
                                               ttlMillis: 60_000), "the new holder's lease was not released")
    }

    func testPassIsSkippedWhileAnotherInstanceHoldsTheLeaseAndRunsOnceItIsFree() async throws {
        let gw = try await GatewayE2E.start(self)
        let parts = gw.harness.parts
        let ledger = parts.storedLedger
        let reconciler = try parts.reconciler()
        XCTAssertTrue(try ledger.acquireLease("reconciliation", holder: "another-instance", now: parts.now(),
                                              ttlMillis: 60_000))
        let skipped = await reconciler.reconcile()
        XCTAssertNil(skipped, "another instance is reconciling")

        try ledger.releaseLease("reconciliation", holder: "another-instance")
        _ = try await runPass(reconciler)
        XCTAssertTrue(try ledger.acquireLease("reconciliation", holder: "another-instance", now: parts.now(),
                                              ttlMillis: 60_000), "the pass gave the lease back when it ended")
    }

    /// A restarted instance (the same stable identity) takes back at once the lease its previous
    /// incarnation held when it crashed mid-pass; another instance still waits for it to run out.
    func testARestartedInstanceTakesBackItsPreviousIncarnationsLeaseAtOnce() async throws {
        let gw = try await GatewayE2E.start(self)
        let parts = gw.harness.parts
        let ledger = parts.storedLedger
        // What a pass of the incarnation that was SIGKILLed left behind: its lease, 5 minutes long.
        XCTAssertTrue(try ledger.acquireLease("reconciliation", holder: "sqlite", now: parts.now(), ttlMillis: 300_000))

        let other = await (try parts.reconciler(identity: .ephemeral())).reconcile()
        let restarted = await (try parts.reconciler(identity: WorkerIdentity(id: "sqlite", isStable: true))).reconcile()

        XCTAssertNil(other, "another instance waits for the lease to run out")
        XCTAssertNotNil(restarted, "the same instance, restarted, runs its pass at once")
        XCTAssertTrue(try ledger.acquireLease("reconciliation", holder: "another-instance", now: parts.now(), ttlMillis: 60_000),
                      "the pass gave the lease back when it ended")
    }
}

/// One pass that must run (no other pass holds the lock).
func runPass(_ reconciler: Reconciler, since: Int64? = nil) async throws -> ReconciliationReport {
    let report = await reconciler.reconcile(since: since)
    return try XCTUnwrap(report, "another reconciliation pass was running")
}

extension GatewayE2E {
    /// A subscriber whose receipt the gateway verified, and the gateway's apps with this one
    /// legacy-only (no Server API credentials): reconciliation re-verifies its stored receipt
    /// (verifyReceipt returns a latest_receipt, which the gateway keeps sealed, for subscribers).
    func legacyOnlySubscriber(owner: String, account: String) async throws -> (apps: [String: AppPolicy], claimed: GatewayAnswer) {
        var apps = harness.parts.apps
        apps[bundleId]?.serverAPI = nil
        _ = try buy(owner: owner)
        let claimed = try await verifyReceipt(try simulator.receipt(owner: owner, bundleId: bundleId), account: account)
        XCTAssertEqual(claimed.status, 200, claimed.text)
        return (apps, claimed)
    }

    /// Waits (bounded) until the gateway's inbox has nothing due, draining it here too: the
    /// background worker may hold an entry in its transaction when this looks.
    func waitUntilInboxIsDrained() async throws {
        for _ in 0..<200 {
            try await harness.parts.notificationMaintenance().drain()
            if try harness.parts.storedLedger.inboxDepth().pending == 0 { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        XCTFail("the inbox did not drain")
    }
}
