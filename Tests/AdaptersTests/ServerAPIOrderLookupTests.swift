import Foundation
import XCTest
@testable import Adapters
import AppleTrust
@testable import Gateway
import HTTPServer
@testable import IAPConfig
import IAPCore
import TestPKI

/// Look Up Order ID through the adapter: Apple's answer is verified like any other JWS (pinned
/// roots, the app's identity and environments), and an order Apple calls invalid is ORDER_NOT_FOUND.
final class ServerAPIOrderLookupTests: XCTestCase {
    private var fx: ServerAPIFixture!

    override func setUp() async throws { fx = try ServerAPIFixture() }
    override func tearDown() async throws { await fx.tearDown() }

    private func lookUp(_ orderId: String, app: AppPolicy? = nil) async throws(VerificationError) -> AdapterOutcome {
        let app = app ?? fx.app()
        let adapter = try! fx.adapter()
        return try await adapter.lookUpOrder(orderId, app: app, policy: ClaimPolicy(app: app, claimant: .apple))
    }

    private func scriptOrder(_ environment: ServerAPIEnvironment, _ orderId: String, _ signed: [String]) {
        fx.server.script("GET", environment, "/inApps/v1/lookup/\(orderId)", ScriptedAppStoreServer.ok([
            "status": .int(0), "signedTransactions": .array(signed.map(JSONValue.string)),
        ]))
    }

    private func scriptInvalid(_ environment: ServerAPIEnvironment, _ orderId: String) {
        fx.server.script("GET", environment, "/inApps/v1/lookup/\(orderId)", ScriptedAppStoreServer.ok(["status": .int(1)]))
    }

    func testAValidOrderAnswersItsTransactionsVerifiedAndNormalised() async throws {
        scriptOrder(.production, "MQ6Z7ABCDE", [try fx.sign(ServerAPIFixture.transaction("3001")),
                                                 try fx.sign(ServerAPIFixture.transaction("3002", productId: "com.example.coins"))])
        let outcome = try await lookUp("MQ6Z7ABCDE")
        XCTAssertEqual(outcome.environment, .production)
        XCTAssertEqual(outcome.transactions.map(\.transactionId).sorted(), ["3001", "3002"])
        XCTAssertEqual(Set(outcome.transactions.map(\.source)), ["serverAPI"])
    }

    func testAnOrderInvalidInProductionIsAskedInSandboxWhenTheAppAllowsIt() async throws {
        scriptInvalid(.production, "SANDBOX1")
        scriptOrder(.sandbox, "SANDBOX1", [try fx.sign(ServerAPIFixture.transaction("3101", environment: "Sandbox"))])
        let outcome = try await lookUp("SANDBOX1", app: fx.app(environments: [.production, .sandbox]))
        XCTAssertEqual(outcome.environment, .sandbox)
        XCTAssertEqual(outcome.transactions.map(\.transactionId), ["3101"])
        XCTAssertEqual(fx.server.requests(to: "/inApps/v1/lookup/SANDBOX1").count, 2)
    }

    func testAnOrderInvalidEverywhereTheAppAllowsIsOrderNotFound() async throws {
        scriptInvalid(.production, "NOSUCH1")
        scriptOrder(.sandbox, "NOSUCH1", [try fx.sign(ServerAPIFixture.transaction("3201", environment: "Sandbox"))])
        let error = await expectVerificationError { () async throws(VerificationError) in try await self.lookUp("NOSUCH1") }
        XCTAssertEqual(error?.code, .orderNotFound)
        XCTAssertEqual(fx.server.requests(to: "/inApps/v1/lookup/NOSUCH1").count, 1, "a Production-only app never asks Sandbox")
    }

    func testAnOrderAnswerSignedByAnotherPKIIsRefusedAsUntrustedRoot() async throws {
        let forger = try TestPKI.CertificateAuthority.make()
        scriptOrder(.production, "FORGED1", [try forger.signer(leaf: try forger.issueLeaf()).sign(ServerAPIFixture.transaction("3301"))])
        let error = await expectVerificationError { () async throws(VerificationError) in try await self.lookUp("FORGED1") }
        XCTAssertEqual(error?.code, .untrustedRoot)
    }

    func testAnOrderOfAnotherAppIsRefused() async throws {
        scriptOrder(.production, "OTHER1", [try fx.sign(ServerAPIFixture.transaction("3401", bundleId: "com.other.app"))])
        let error = await expectVerificationError { () async throws(VerificationError) in try await self.lookUp("OTHER1") }
        XCTAssertEqual(error?.code, .bundleIdMismatch)
    }

    func testAStatusOtherThanZeroOrOneIsApplesFault() async throws {
        fx.server.script("GET", .production, "/inApps/v1/lookup/ODD1", ScriptedAppStoreServer.ok(["status": .int(7)]))
        let error = await expectVerificationError { () async throws(VerificationError) in try await self.lookUp("ODD1") }
        XCTAssertEqual(error?.code, .upstreamInvalidResponse)
    }

    func testAnOrderIdThatIsNotLettersAndDigitsNeverReachesApple() async throws {
        let error = await expectVerificationError { () async throws(VerificationError) in try await self.lookUp("MQ6/../x") }
        XCTAssertEqual(error?.code, .malformedRequest)
        XCTAssertEqual(fx.server.requests.count, 0)
    }
}
