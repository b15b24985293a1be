import AppStoreSimulator
import Foundation
import IAPCore
import Ledger
import XCTest

/// Regressions for what a review of the gateway found: refunds must never be granted back, and
/// offers must not be mistaken for wrong prices.
final class ReviewRegressionTests: XCTestCase {
    /// Waits (bounded) until the gateway's inbox has processed everything it holds.
    private func drained(_ gw: GatewayE2E) async throws {
        let ledger = try SQLiteLedger(storage: gw.sqlitePath)
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
