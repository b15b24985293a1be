import AppStoreSimulator
import Foundation
import IAPCore
import TestSupport
import XCTest

/// Verified evidence the gateway must still refuse, each with its stable code.
final class PolicyRefusalTests: XCTestCase {
    static let otherBundle = "com.example.other"

    private func buyInOtherApp(_ gw: GatewayE2E, owner: String) throws -> SimulatedPurchase {
        try gw.simulator.registerApp(bundleId: Self.otherBundle, appAppleId: 987_654_321, sharedSecret: "other-app-secret")
        return try gw.buy(GatewayE2E.removeAds, owner: owner, bundleId: Self.otherBundle)
    }

    func testAnotherAppsReceiptVerifiedLocallyIsRefusedAsBundleIdMismatch() async throws {
        let gw = try await GatewayE2E.start(self) { $0.receiptRouting = "serverAPI" }
        let foreign = try buyInOtherApp(gw, owner: "device-eve")

        let answer = try await gw.verifyReceipt(foreign.receiptBase64, account: "eve")

        assertRefused(answer, 422, "BUNDLE_ID_MISMATCH")
    }

    func testAnotherAppsReceiptSentToVerifyReceiptIsRefusedBeforeAnyGrant() async throws {
        // Apple would check our shared secret against the receipt's own app and answer 21004, which
        // reads as our credentials being wrong: the adapter refuses the foreign bundle before calling.
        let gw = try await GatewayE2E.start(self)
        let foreign = try buyInOtherApp(gw, owner: "device-eve")

        let answer = try await gw.verifyReceipt(foreign.receiptBase64, account: "eve")

        assertRefused(answer, 422, "BUNDLE_ID_MISMATCH")
        let entitlements = try await gw.entitlements("eve")
        XCTAssertTrue(entitlements.isEmpty)
    }

    func testAnotherAppsSignedTransactionIsRefusedAsBundleIdMismatch() async throws {
        let gw = try await GatewayE2E.start(self) { $0.localOnlyJWS = true }
        let foreign = try buyInOtherApp(gw, owner: "device-eve")

        let answer = try await gw.verifySigned(foreign.signedTransaction, account: "eve")

        assertRefused(answer, 422, "BUNDLE_ID_MISMATCH")
    }

    func testSandboxReceiptForAProductionOnlyAppIsRefusedAsEnvironmentNotAllowed() async throws {
        let gw = try await GatewayE2E.start(self) { $0.allowedEnvironments = ["Production"]; $0.sandboxAccounts = ["reviewer"] }
        let purchase = try gw.buy(owner: "device-tester", environment: .sandbox)

        let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: "tester")

        assertRefused(answer, 422, "ENVIRONMENT_NOT_ALLOWED")
    }

    func testSandboxReceiptOfAListedSandboxAccountIsGrantedInAProductionOnlyApp() async throws {
        let gw = try await GatewayE2E.start(self) { $0.allowedEnvironments = ["Production"]; $0.sandboxAccounts = ["reviewer"] }
        let purchase = try gw.buy(owner: "device-reviewer", environment: .sandbox)

        let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: "reviewer")

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.json["environment"]?.stringValue, "Sandbox", "reached through verifyReceipt's 21007")
    }

    func testPurchaseOfAProductOutsideTheCatalogIsRefusedAsUnknownProduct() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy("com.example.demo.lifetime", owner: "device-bob", price: 19_990)

        let answer = try await gw.verifyTransactionId(purchase.transactionId, account: "bob")

        assertRefused(answer, 422, "UNKNOWN_PRODUCT")
    }

    func testPurchaseAtAnotherPriceThanTheCatalogsIsRefusedAsPriceMismatch() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob", price: 990)

        let answer = try await gw.verifyTransactionId(purchase.transactionId, account: "bob")

        assertRefused(answer, 422, "PRICE_MISMATCH")
    }

    func testRefundedTransactionIsRefusedAsRevoked() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")
        _ = try gw.simulator.refund(transactionId: purchase.transactionId)

        let answer = try await gw.verifyTransactionId(purchase.transactionId, account: "bob")

        assertRefused(answer, 422, "TRANSACTION_REVOKED")
    }

    func testRevokedFamilySharedAccessIsRefusedAsRevoked() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")
        let revoked = try gw.simulator.revoke(transactionId: purchase.transactionId)

        let answer = try await gw.verifySigned(revoked.signedTransaction, account: "bob")

        assertRefused(answer, 422, "TRANSACTION_REVOKED")
    }

    func testReusedNonceIsRefused() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")
        let nonce = try await gw.nonce(for: "alice")
        let body: [String: JSONValue] = ["account": "alice", "receipt": .string(purchase.receiptBase64), "nonce": .string(nonce)]
        let first = try await gw.post("verify", body)
        XCTAssertEqual(first.status, 200, first.text)

        let second = try await gw.post("verify", body)

        assertRefused(second, 422, "NONCE_REUSED")
    }

    func testNonceIssuedForAnotherAccountIsRefusedAsInvalid() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")
        let bobsNonce = try await gw.nonce(for: "bob")

        let answer = try await gw.post("verify", ["account": "alice", "receipt": .string(purchase.receiptBase64),
                                                  "nonce": .string(bobsNonce)])

        assertRefused(answer, 422, "NONCE_INVALID")
    }

    func testReceiptWithoutNonceIsRefusedWhenTheAppRequiresOne() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")

        let answer = try await gw.post("verify", ["account": "alice", "receipt": .string(purchase.receiptBase64)])

        assertRefused(answer, 422, "NONCE_REQUIRED")
    }
}
