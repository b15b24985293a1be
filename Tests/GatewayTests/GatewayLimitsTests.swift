import AppStoreSimulator
import Foundation
import IAPCore
import TestSupport
import XCTest

/// The gateway file's `limits.maxJWSBytes` reaches every verifier the gateway runs.
final class GatewayLimitsTests: XCTestCase {
    func testASignedTransactionOverMaxJWSBytesIsRefusedInputTooLarge() async throws {
        let gw = try await GatewayE2E.start(self) { $0.maxJWSBytes = 1024 }
        let purchase = try gw.buy(owner: "device-lee")
        XCTAssertGreaterThan(purchase.signedTransaction.utf8.count, 1024)

        let answer = try await gw.verifySigned(purchase.signedTransaction, account: "lee")

        XCTAssertEqual(answer.errorCode, "INPUT_TOO_LARGE", answer.text)
        XCTAssertEqual(answer.status, 413)
        let entitlements = try await gw.entitlements("lee")
        XCTAssertTrue(entitlements.isEmpty)
    }

    func testANotificationOverMaxJWSBytesIsRefusedInputTooLargeAndNotStored() async throws {
        let e2e = try await NotificationE2E.start(self) { $0.maxJWSBytes = 1024 }
        let purchase = try e2e.subscribe(owner: "device-lee")
        let signed = try await e2e.signed("DID_RENEW", about: purchase)
        XCTAssertGreaterThan(signed.utf8.count, 1024)

        let answer = try await e2e.post(signedPayload: signed)

        XCTAssertEqual(answer.errorCode, "INPUT_TOO_LARGE", answer.text)
        XCTAssertEqual(try e2e.inboxIds(), [])
    }

    func testTheConnectionLimitsOfTheGatewayFileReachItsHTTPServer() async throws {
        // The defaults (the harness's gateway file sets none): one client address may hold a quarter
        // of the connections, so it cannot keep /healthz from everyone else (HTTPEdgeTests shows how).
        let gw = try await GatewayE2E.start(self)
        XCTAssertEqual(gw.harness.server.configuration.maxConnections, 1024)
        XCTAssertEqual(gw.harness.server.configuration.perIPConnectionLimit, 256)
    }

    // MARK: Sandbox notifications: one rule for V1 and V2

    func testSandboxNotificationsAreAcceptedV1AndV2WhereOnlySandboxAccountsMayUseSandbox() async throws {
        // A notification names no account: Sandbox ones are taken wherever the app takes Sandbox at all.
        let e2e = try await NotificationE2E.start(self) { $0.allowedEnvironments = ["Production"]; $0.sandboxAccounts = ["reviewer"] }
        let purchase = try e2e.subscribe(owner: "device-rev", environment: .sandbox)

        let v2 = try await e2e.post(signedPayload: try await e2e.signed("DID_RENEW", about: purchase))
        let v1 = try await e2e.postRaw(try await e2e.v1Body(type: "DID_RENEW", owner: "device-rev",
                                                            password: e2e.gw.harness.sharedSecret, environment: .sandbox))

        XCTAssertEqual(v2.status, 200, v2.text)
        XCTAssertEqual(v1.status, 200, v1.text)
        try await e2e.waitUntilDrained()
        XCTAssertEqual(try e2e.inboxIds().count, 2)
    }

    func testSandboxNotificationsAreRefusedV1AndV2WhereTheAppTakesNoSandboxEvidence() async throws {
        let e2e = try await NotificationE2E.start(self) { $0.allowedEnvironments = ["Production"] }
        let purchase = try e2e.subscribe(owner: "device-rev", environment: .sandbox)

        let v2 = try await e2e.post(signedPayload: try await e2e.signed("DID_RENEW", about: purchase))
        let v1 = try await e2e.postRaw(try await e2e.v1Body(type: "DID_RENEW", owner: "device-rev",
                                                            password: e2e.gw.harness.sharedSecret, environment: .sandbox))

        XCTAssertEqual(v2.errorCode, "ENVIRONMENT_NOT_ALLOWED", v2.text)
        XCTAssertEqual(v1.errorCode, "ENVIRONMENT_NOT_ALLOWED", v1.text)
        XCTAssertEqual(try e2e.inboxIds(), [])
    }
}
