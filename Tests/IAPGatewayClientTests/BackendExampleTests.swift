import AppStoreSimulator
import Foundation
import IAPGatewayClient
import XCTest

/// The backend route the README shows (BackendExample.swift, included there verbatim), end to end.
final class BackendExampleTests: XCTestCase {
    func testEachAnswerTellsTheAppWhetherToFinish() async throws {
        let gw = try await ClientDeployment.start(self)
        let gateway = try gw.client()
        let bought = try gw.buy(owner: "device-alice")

        let aliceKey = UUID().uuidString
        var reply = await handlePurchase(.signedTransaction(bought.signedTransaction), account: "alice", purchaseKey: aliceKey,
                                         gateway: gateway)
        XCTAssertEqual(reply, .unlocked(productIds: [ClientDeployment.monthly]))
        // The app sends the same purchase again (it never heard back): the same answer.
        reply = await handlePurchase(.signedTransaction(bought.signedTransaction), account: "alice", purchaseKey: aliceKey,
                                     gateway: gateway)
        XCTAssertEqual(reply, .unlocked(productIds: [ClientDeployment.monthly]))

        reply = await handlePurchase(.transactionId(bought.transactionId), account: "mallory", purchaseKey: UUID().uuidString, gateway: gateway)
        XCTAssertEqual(reply, .refused(code: "TRANSACTION_BOUND_TO_OTHER_ACCOUNT"))

        let lapsed = try gw.harness.simulator.purchase(PurchaseRequest(
            bundleId: gw.harness.bundleId, productId: ClientDeployment.monthly, type: .autoRenewable, owner: "device-bob",
            subscriptionGroupIdentifier: "demo.pro", periodSeconds: 86_400, price: 4_990,
            purchaseDate: Date().addingTimeInterval(-2 * 86_400)))
        reply = await handlePurchase(.transactionId(lapsed.transactionId), account: "bob", purchaseKey: UUID().uuidString, gateway: gateway)
        XCTAssertEqual(reply, .notGranted)

        let later = try gw.buy(ClientDeployment.removeAds, owner: "device-carol")
        gw.harness.simulator.faults.rateLimitNext(10, retryAfterSeconds: 90)
        reply = await handlePurchase(.transactionId(later.transactionId), account: "carol", purchaseKey: UUID().uuidString, gateway: gateway)
        XCTAssertEqual(reply, .tryAgain(after: .seconds(90)))
    }

    func testTheGatewaysOwnFaultKeepsThePurchaseUnfinished() async throws {
        let gw = try await ClientDeployment.start(self)
        let gateway = try gw.client()
        let bought = try gw.buy(owner: "device-dave")
        // Apple refuses the gateway's credentials: 502, not retryable, not the evidence's fault.
        _ = try gw.harness.simulator.registerApp(bundleId: gw.harness.bundleId, appAppleId: gw.harness.options.appAppleId,
                                                 sharedSecret: "rotated-elsewhere")
        let direct = await refusal { () async throws(IAPGatewayError) in
            try await gateway.verifyReceipt(bought.receiptBase64, account: "dave")
        }
        XCTAssertEqual(direct?.code, "UPSTREAM_CREDENTIALS_REJECTED")
        XCTAssertEqual(direct?.retryable, false)
        let reply = await handlePurchase(.receipt(bought.receiptBase64, nonce: try await gateway.nonce(account: "dave").nonce),
                                         account: "dave", purchaseKey: UUID().uuidString, gateway: gateway)
        XCTAssertEqual(reply, .tryAgain(after: nil))

        // A wrong API key is the backend's configuration, not the evidence: unfinished too.
        let misconfigured = try gw.client(apiKey: "not-the-key")
        let unauthenticated = await handlePurchase(.transactionId(bought.transactionId), account: "dave", purchaseKey: UUID().uuidString, gateway: misconfigured)
        XCTAssertEqual(unauthenticated, .tryAgain(after: nil))
    }
}
