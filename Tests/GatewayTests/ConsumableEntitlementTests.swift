import AppStoreSimulator
import Foundation
import IAPCore
import TestSupport
import XCTest

/// A consumable is credited once and grants no lasting access: a backend that unlocks on
/// `grantsAccess` must not treat a pack of coins as a lifetime unlock. Over real HTTP against the
/// simulator, for each kind of evidence that can carry one.
final class ConsumableEntitlementTests: XCTestCase {
    static let coins = "com.example.demo.coins100"

    private func buyCoins(_ gw: GatewayE2E, owner: String) throws -> SimulatedPurchase {
        try gw.simulator.purchase(PurchaseRequest(bundleId: gw.bundleId, productId: Self.coins, type: .consumable,
                                                  owner: owner, price: 990))
    }

    private func assertCredited(_ entitlements: [JSONValue], chain: String, file: StaticString = #filePath, line: UInt = #line) {
        let e = entitlements.first { $0["originalTransactionId"]?.stringValue == chain }
        XCTAssertEqual(e?["productId"]?.stringValue, Self.coins, "\(entitlements)", file: file, line: line)
        XCTAssertEqual(e?["state"], "credited", "\(entitlements)", file: file, line: line)
        XCTAssertEqual(e?["grantsAccess"], .bool(false), "\(entitlements)", file: file, line: line)
        XCTAssertNil(e?["expiresDate"], file: file, line: line)
    }

    func testAConsumableIsCreditedOnceAndGrantsNoLastingAccess() async throws {
        let gw = try await GatewayE2E.start(self)
        let coins = try buyCoins(gw, owner: "device-cody")

        let first = try await gw.verifyTransactionId(coins.transactionId, account: "cody")
        XCTAssertEqual(first.status, 200, first.text)
        XCTAssertEqual(first.json["verdict"], "granted", "the claim is good: credit it")
        XCTAssertEqual(first.json["newlyGranted"], .array([.string(coins.transactionId)]))
        assertCredited(first.json["entitlements"]?.arrayValue ?? [], chain: coins.originalTransactionId)

        let again = try await gw.verifySigned(coins.signedTransaction, account: "cody")
        XCTAssertEqual(again.status, 200, again.text)
        XCTAssertEqual(again.json["newlyGranted"], .array([]), "credited once")
        XCTAssertEqual(again.json["alreadyGranted"], .array([.string(coins.transactionId)]))
        assertCredited(try await gw.entitlements("cody"), chain: coins.originalTransactionId)
    }

    func testAConsumableInALegacyReceiptIsCreditedByTheCatalogsType() async throws {
        let gw = try await GatewayE2E.start(self)
        let coins = try buyCoins(gw, owner: "device-dora")

        let answer = try await gw.verifyReceipt(coins.receiptBase64, account: "dora")

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.json["verdict"], "granted")
        XCTAssertEqual(answer.json["newlyGranted"], .array([.string(coins.transactionId)]))
        assertCredited(answer.json["entitlements"]?.arrayValue ?? [], chain: coins.originalTransactionId)
        assertCredited(try await gw.entitlements("dora"), chain: coins.originalTransactionId)
    }

    func testANonConsumableStillGrantsLastingAccess() async throws {
        let gw = try await GatewayE2E.start(self)
        let removeAds = try gw.buy(GatewayE2E.removeAds, owner: "device-ezra")

        let answer = try await gw.verifyTransactionId(removeAds.transactionId, account: "ezra")

        XCTAssertEqual(answer.status, 200, answer.text)
        let e = answer.json["entitlements"]?.arrayValue?.first
        XCTAssertEqual(e?["state"], "active")
        XCTAssertEqual(e?["grantsAccess"], .bool(true))
    }
}
