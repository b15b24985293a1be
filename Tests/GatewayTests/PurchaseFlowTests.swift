import AppStoreSimulator
import Foundation
import IAPCore
import Ledger
import TestSupport
import XCTest

/// The issue's happy paths, end to end over loopback HTTP: client → gateway → App Store simulator.
final class PurchaseFlowTests: XCTestCase {
    func testOldAppReceiptWithNonceIsGrantedAndTheSubscriptionIsActive() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")

        let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: "alice")

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.json["verdict"]?.stringValue, "granted")
        XCTAssertEqual(answer.json["adapter"]?.stringValue, "verifyReceipt")
        XCTAssertEqual(answer.json["newlyGranted"]?.arrayValue?.compactMap(\.stringValue), [purchase.transactionId])
        let entitlements = try await gw.entitlements("alice")
        XCTAssertEqual(entitlements.count, 1)
        XCTAssertEqual(entitlements.first?["productId"]?.stringValue, GatewayE2E.monthly)
        XCTAssertEqual(entitlements.first?["state"]?.stringValue, "active")
        XCTAssertEqual(entitlements.first?["grantsAccess"], .bool(true))
        XCTAssertEqual(entitlements.first?["originalTransactionId"]?.stringValue, purchase.originalTransactionId)
    }

    func testNewAppTransactionIdIsConfirmedByTheServerAPIAndGranted() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")

        let answer = try await gw.verifyTransactionId(purchase.transactionId, account: "bob")

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.json["adapter"]?.stringValue, "serverAPI")
        XCTAssertEqual(answer.json["newlyGranted"]?.arrayValue?.compactMap(\.stringValue), [purchase.transactionId])
        let entitlements = try await gw.entitlements("bob")
        XCTAssertEqual(entitlements.map { $0["productId"]?.stringValue }, [GatewayE2E.removeAds])
    }

    func testSignedTransactionIsConfirmedByTheServerAPI() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")

        let answer = try await gw.verifySigned(purchase.signedTransaction, account: "bob")

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.json["verdict"]?.stringValue, "granted")
        XCTAssertEqual(answer.json["adapter"]?.stringValue, "serverAPI")
    }

    func testSignedTransactionConfirmationDependsOnTheServerAPIWhenNotLocalOnly() async throws {
        // The control for the local-only test below: the same fault does stop a confirmed verification.
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")
        gw.simulator.faults.failNext(1_000)

        let answer = try await gw.verifySigned(purchase.signedTransaction, account: "bob")

        assertRefused(answer, 503, "UPSTREAM_UNAVAILABLE")
    }

    func testLocalOnlySignedTransactionIsGrantedWithoutAnyServerAPICall() async throws {
        let gw = try await GatewayE2E.start(self) { $0.localOnlyJWS = true }
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")
        // Every Server API call would fail: a 200 proves none was made.
        gw.simulator.faults.failNext(1_000)

        let answer = try await gw.verifySigned(purchase.signedTransaction, account: "bob")

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.json["verdict"]?.stringValue, "granted")
        XCTAssertEqual(gw.simulator.faults.settings().failNext, 1_000, "no request reached the simulator")
    }

    func testMigratedAppVerifiesReceiptLocallyAndReadsHistoryWithoutCallingVerifyReceipt() async throws {
        let gw = try await GatewayE2E.start(self) { $0.receiptRouting = "serverAPI" }
        let purchase = try gw.buy(owner: "device-carol")
        // verifyReceipt would now answer 21004 to every call (the gateway's secret is stale), while the
        // Server API key still works: a 200 proves the receipt never went to verifyReceipt.
        try gw.rotateSimulatorSharedSecret(to: "rotated-" + UUID().uuidString)

        let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: "carol")

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.json["adapter"]?.stringValue, "serverAPI")
        let ids = answer.json["transactions"]?.arrayValue?.compactMap { $0["transactionId"]?.stringValue }
        XCTAssertEqual(ids, [purchase.transactionId])
        let entitlements = try await gw.entitlements("carol")
        XCTAssertEqual(entitlements.first?["state"]?.stringValue, "active")
    }

    func testReplayByASecondAccountIsRefusedAsBoundToOtherAccount() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")
        let first = try await gw.verifyTransactionId(purchase.transactionId, account: "bob")
        XCTAssertEqual(first.status, 200, first.text)

        let replay = try await gw.verifyTransactionId(purchase.transactionId, account: "mallory")
        let replaySigned = try await gw.verifySigned(purchase.signedTransaction, account: "mallory")

        assertRefused(replay, 409, "TRANSACTION_BOUND_TO_OTHER_ACCOUNT")
        assertRefused(replaySigned, 409, "TRANSACTION_BOUND_TO_OTHER_ACCOUNT")
        let malloryEntitlements = try await gw.entitlements("mallory")
        XCTAssertTrue(malloryEntitlements.isEmpty)
        let again = try await gw.verifyTransactionId(purchase.transactionId, account: "bob")
        XCTAssertEqual(again.status, 200, "the owner may present it again")
        XCTAssertEqual(again.json["alreadyGranted"]?.arrayValue?.compactMap(\.stringValue), [purchase.transactionId])
    }

    func testFiftyConcurrentClaimsOfOnePurchaseBindItToExactlyOneAccount() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-shared")

        let answers = try await withThrowingTaskGroup(of: (String, GatewayAnswer).self) { group in
            for i in 0..<50 {
                let account = "claimant-\(i)"
                group.addTask { (account, try await gw.verifyTransactionId(purchase.transactionId, account: account)) }
            }
            return try await group.reduce(into: [(String, GatewayAnswer)]()) { $0.append($1) }
        }

        let winners = answers.filter { $0.1.status == 200 }
        let losers = answers.filter { $0.1.status == 409 && $0.1.errorCode == "TRANSACTION_BOUND_TO_OTHER_ACCOUNT" }
        XCTAssertEqual(winners.count, 1, answers.map { "\($0.1.status) \($0.1.errorCode ?? "")" }.joined(separator: ", "))
        XCTAssertEqual(losers.count, 49)
        let ledger = try SQLLedger(storage: "sqlite:" + gw.sqlitePath)
        let owner = try ledger.owner(bundleId: gw.bundleId, originalTransactionId: purchase.originalTransactionId)
        XCTAssertEqual(owner, winners.first?.0)
    }
}
