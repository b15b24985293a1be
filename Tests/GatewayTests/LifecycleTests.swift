import AppStoreSimulator
import Foundation
import Gateway
import IAPCore
import TestSupport
import UpstreamHTTP
import XCTest

/// Purchases that change after the first claim, races on single-use state, and shutting down.
final class LifecycleTests: XCTestCase {
    func testRenewalOfABoundSubscriptionStaysWithItsOwner() async throws {
        let gw = try await GatewayE2E.start(self)
        let first = try gw.buy(owner: "device-bob")
        let claimed = try await gw.verifyTransactionId(first.transactionId, account: "bob")
        XCTAssertEqual(claimed.status, 200, claimed.text)
        let renewal = try gw.simulator.renew(originalTransactionId: first.originalTransactionId)
        XCTAssertNotEqual(renewal.transactionId, first.transactionId)

        let stolen = try await gw.verifyTransactionId(renewal.transactionId, account: "mallory")
        let owned = try await gw.verifyTransactionId(renewal.transactionId, account: "bob")

        XCTAssertEqual(stolen.status, 409, stolen.text)
        XCTAssertEqual(stolen.errorCode, "TRANSACTION_BOUND_TO_OTHER_ACCOUNT")
        XCTAssertEqual(owned.status, 200, owned.text)
        XCTAssertEqual(owned.json["newlyGranted"]?.arrayValue?.compactMap(\.stringValue), [renewal.transactionId])
    }

    func testExpiredSubscriptionIsReportedAsExpiredWithoutAccess() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")
        _ = try gw.simulator.expire(originalTransactionId: purchase.originalTransactionId)
        let receipt = try gw.simulator.receipt(owner: "device-alice", bundleId: gw.bundleId)

        let answer = try await gw.verifyReceipt(receipt, account: "alice")

        XCTAssertEqual(answer.status, 200, answer.text)
        let entitlements = try await gw.entitlements("alice")
        XCTAssertEqual(entitlements.first?["state"]?.stringValue, "expired")
        XCTAssertEqual(entitlements.first?["grantsAccess"], .bool(false))
    }

    func testOneNonceUsedByTwentyConcurrentRequestsLetsExactlyOneThrough() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")
        let nonce = try await gw.nonce(for: "alice")
        let body: [String: JSONValue] = ["account": "alice", "receipt": .string(purchase.receiptBase64), "nonce": .string(nonce)]

        let answers = try await withThrowingTaskGroup(of: GatewayAnswer.self) { group in
            for _ in 0..<20 { group.addTask { try await gw.post("verify", body) } }
            return try await group.reduce(into: [GatewayAnswer]()) { $0.append($1) }
        }

        XCTAssertEqual(answers.filter { $0.status == 200 }.count, 1, answers.map(\.text).joined(separator: "\n"))
        XCTAssertEqual(answers.filter { $0.errorCode == "NONCE_REUSED" }.count, 19)
    }

    func testFamilySharedPurchaseIsRefusedWhenThePolicyDeniesIt() async throws {
        let gw = try await GatewayE2E.start(self) { $0.familySharing = "deny" }
        let purchase = try gw.simulator.purchase(PurchaseRequest(
            bundleId: gw.bundleId, productId: GatewayE2E.removeAds, type: .nonConsumable, owner: "device-kid",
            price: 2_990, familyShared: true))

        let answer = try await gw.verifyTransactionId(purchase.transactionId, account: "kid")

        XCTAssertEqual(answer.status, 422, answer.text)
        XCTAssertEqual(answer.errorCode, "FAMILY_SHARING_NOT_ALLOWED")
    }

    func testPurchaseMadeWithAnotherAccountsAppAccountTokenIsRefused() async throws {
        let gw = try await GatewayE2E.start(self)
        let token = AppAccountToken.derive(bundleId: gw.bundleId, account: "alice")
        let purchase = try gw.simulator.purchase(PurchaseRequest(
            bundleId: gw.bundleId, productId: GatewayE2E.removeAds, type: .nonConsumable, owner: "device-alice",
            price: 2_990, appAccountToken: token))

        let byBob = try await gw.verifySigned(purchase.signedTransaction, account: "bob")
        let byAlice = try await gw.verifySigned(purchase.signedTransaction, account: "alice")

        XCTAssertEqual(byBob.status, 422, byBob.text)
        XCTAssertEqual(byBob.errorCode, "APP_ACCOUNT_TOKEN_MISMATCH")
        XCTAssertEqual(byAlice.status, 200, byAlice.text)
    }

    func testShutdownLetsTheRequestInFlightFinishAndRefusesNewConnections() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")
        // Holds the request inside the gateway (waiting on Apple) while the shutdown starts.
        gw.simulator.faults.setLatency(milliseconds: 500)
        let inFlight = Task { try await gw.verifyTransactionId(purchase.transactionId, account: "bob") }
        while gw.harness.server.inFlight == 0 { try await Task.sleep(for: .milliseconds(5)) }

        await gw.harness.server.shutdown(gracePeriod: .seconds(10))

        let finished = try await inFlight.value
        XCTAssertEqual(finished.status, 200, finished.text)
        do {
            let late = try await gw.get("/healthz")
            XCTFail("a request after shutdown was answered: \(late.status)")
        } catch let error as UpstreamError {
            guard case .connectFailed = error else { return XCTFail("expected a refused connection, got \(error)") }
        }
    }
}
