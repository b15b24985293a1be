import AppStoreSimulator
import Foundation
import IAPCore
import Ledger
import TestSupport
import XCTest

/// Corners of the contract: all-or-nothing claims, sandbox by transaction id, account names in URLs,
/// request hygiene beyond JSON syntax.
final class EdgeCaseTests: XCTestCase {
    func testReceiptMixingOwnAndForeignPurchasesBindsNothingToTheClaimant() async throws {
        let gw = try await GatewayE2E.start(self)
        let removeAds = try gw.buy(GatewayE2E.removeAds, owner: "device-shared")
        let claimed = try await gw.verifyTransactionId(removeAds.transactionId, account: "alice")
        XCTAssertEqual(claimed.status, 200, claimed.text)
        let monthly = try gw.buy(owner: "device-shared")  // same device: its receipt now holds both

        let answer = try await gw.verifyReceipt(monthly.receiptBase64, account: "bob")

        XCTAssertEqual(answer.status, 409, answer.text)
        XCTAssertEqual(answer.errorCode, "TRANSACTION_BOUND_TO_OTHER_ACCOUNT")
        let bobs = try await gw.entitlements("bob")
        XCTAssertTrue(bobs.isEmpty)
        let ledger = try SQLLedger(storage: "sqlite:" + gw.sqlitePath)
        XCTAssertNil(try ledger.owner(bundleId: gw.bundleId, originalTransactionId: monthly.originalTransactionId),
                     "the refused claim wrote nothing")
    }

    func testSandboxTransactionIdInAProductionOnlyAppIsRefusedUnlessTheAccountIsListed() async throws {
        let gw = try await GatewayE2E.start(self) { $0.allowedEnvironments = ["Production"]; $0.sandboxAccounts = ["reviewer"] }
        let tester = try gw.buy(GatewayE2E.removeAds, owner: "device-tester", environment: .sandbox)
        let reviewer = try gw.buy(GatewayE2E.removeAds, owner: "device-reviewer", environment: .sandbox)

        let refused = try await gw.verifyTransactionId(tester.transactionId, account: "tester")
        let granted = try await gw.verifyTransactionId(reviewer.transactionId, account: "reviewer")

        // The Server API adapter asks the sandbox host only for accounts allowed Sandbox purchases,
        // so for anyone else a sandbox transaction id simply does not exist in production.
        XCTAssertEqual(refused.status, 422, refused.text)
        XCTAssertEqual(refused.errorCode, "TRANSACTION_NOT_FOUND")
        XCTAssertEqual(granted.status, 200, granted.text)
        XCTAssertEqual(granted.json["environment"]?.stringValue, "Sandbox")
    }

    func testSandboxSignedTransactionVerifiedLocallyIsRefusedInAProductionOnlyApp() async throws {
        let gw = try await GatewayE2E.start(self) { $0.allowedEnvironments = ["Production"]; $0.localOnlyJWS = true }
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-tester", environment: .sandbox)

        let answer = try await gw.verifySigned(purchase.signedTransaction, account: "tester")

        XCTAssertEqual(answer.status, 422, answer.text)
        XCTAssertEqual(answer.errorCode, "ENVIRONMENT_NOT_ALLOWED")
    }

    func testEntitlementsOfAnAccountWithURLReservedCharactersAreFoundPercentEncoded() async throws {
        let gw = try await GatewayE2E.start(self)
        let account = "user+1@example.com"
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-user")
        let answer = try await gw.verifyTransactionId(purchase.transactionId, account: account)
        XCTAssertEqual(answer.status, 200, answer.text)

        let listed = try await gw.send("GET", "\(gw.appURL)/accounts/user%2B1%40example.com/entitlements")

        XCTAssertEqual(listed.status, 200, listed.text)
        XCTAssertEqual(listed.json["account"]?.stringValue, account)
        XCTAssertEqual(listed.json["entitlements"]?.arrayValue?.count, 1)
    }

    func testBodyWithoutJSONContentTypeIsRefused() async throws {
        let gw = try await GatewayE2E.start(self)

        let answer = try await gw.send("POST", "\(gw.appURL)/nonces", body: Array(#"{"account":"alice"}"#.utf8),
                                       contentType: "text/plain")

        XCTAssertEqual(answer.status, 400, answer.text)
        XCTAssertEqual(answer.errorCode, "MALFORMED_REQUEST")
    }

    func testUnknownBodyMemberIsRefusedRatherThanIgnored() async throws {
        let gw = try await GatewayE2E.start(self)

        let answer = try await gw.post("verify", ["account": "alice", "transactionID": "2000000000000001"])

        XCTAssertEqual(answer.status, 400, answer.text)
        XCTAssertEqual(answer.errorCode, "MALFORMED_REQUEST")
    }

    func testTwoKindsOfEvidenceInOneRequestAreRefused() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")

        let answer = try await gw.post("verify", ["account": "bob", "transactionId": .string(purchase.transactionId),
                                                  "signedTransaction": .string(purchase.signedTransaction)])

        XCTAssertEqual(answer.status, 400, answer.text)
        XCTAssertEqual(answer.errorCode, "MALFORMED_REQUEST")
    }

    func testUnknownTransactionIdIsRefusedAsNotFound() async throws {
        let gw = try await GatewayE2E.start(self)

        let answer = try await gw.verifyTransactionId("2000000999999999", account: "bob")

        XCTAssertEqual(answer.status, 422, answer.text)
        XCTAssertEqual(answer.errorCode, "TRANSACTION_NOT_FOUND")
    }
}
