import Foundation
import IAPConfig
import IAPCore
import TestSupport
import XCTest

/// The gateway's secret files are read by their own thread, never by a request: a rotation is used
/// after the refresh, and a failed refresh is logged and counted while the last good value serves.
final class SecretRefreshTests: XCTestCase {
    func testARequestReadsNoSecretFileAndAFailedRefreshIsReportedWhileTheLastGoodValueServes() async throws {
        let logs = LogCapture()
        let gw = try await GatewayE2E.start(self, logger: logs.logger)
        let purchase = try gw.buy(owner: "device-alice")
        let secret = gw.harness.directory.appendingPathComponent("secrets/shared-secret")
        let away = secret.appendingPathExtension("away")
        let failuresBefore = SecretFiles.shared.refreshFailures

        // The file gone (a mount lost): a request that read it would fail; the refresh does.
        try FileManager.default.moveItem(at: secret, to: away)
        XCTAssertTrue(SecretFiles.shared.refreshNow(within: .seconds(10)))
        let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: "alice")
        XCTAssertEqual(answer.status, 200, "verifyReceipt used the last good shared secret: \(answer.text)")
        XCTAssertGreaterThan(SecretFiles.shared.refreshFailures, failuresBefore)
        let metrics = try await gw.get("/metrics").text
        let stale = try XCTUnwrap(metrics.split(separator: "\n").first { $0.hasPrefix("iapgw_secret_files_stale ") })
        XCTAssertGreaterThan(Int(stale.split(separator: " ")[1]) ?? 0, 0, metrics)
        XCTAssertTrue(metrics.contains("iapgw_secret_refresh_failures_total "), metrics)
        let failed = try XCTUnwrap(logs.captured.first { $0.contains("secret_refresh_failed") })
        XCTAssertTrue(failed.contains("\(gw.bundleId): sharedSecret"), failed)
        for leak in [secret.path, "secrets/", gw.harness.sharedSecret] {
            XCTAssertFalse(failed.contains(leak), "\(leak) in \(failed)")
            XCTAssertFalse(metrics.contains(leak))
            XCTAssertFalse(answer.text.contains(leak))
        }

        try FileManager.default.moveItem(at: away, to: secret)
        XCTAssertTrue(SecretFiles.shared.refreshNow(within: .seconds(10)))
        XCTAssertTrue(logs.captured.contains { $0.contains("secret_refreshed") && $0.contains("\(gw.bundleId): sharedSecret") })
        let again = try await gw.verifyReceipt(purchase.receiptBase64, account: "alice")
        XCTAssertEqual(again.status, 200, again.text)
    }

    func testARotatedSharedSecretIsUsedAfterTheRefresh() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")
        try gw.rotateSimulatorSharedSecret(to: "rotated-secret-1f3b")
        let refused = try await gw.verifyReceipt(purchase.receiptBase64, account: "alice")
        XCTAssertEqual(refused.errorCode, "UPSTREAM_CREDENTIALS_REJECTED", refused.text)
        try gw.rewriteSecretFile("shared-secret", "rotated-secret-1f3b")
        let granted = try await gw.verifyReceipt(purchase.receiptBase64, account: "alice")
        XCTAssertEqual(granted.status, 200, granted.text)
        XCTAssertFalse(granted.text.contains("rotated-secret-1f3b"))
    }

    func testADeletedPreviousSharedSecretIsRevokedAtTheNextRefresh() async throws {
        let previous = "previous-secret-4e21"
        let e2e = try await NotificationE2E.start(self) { $0.previousSharedSecret = previous }
        _ = try e2e.subscribe(owner: "device-pia")
        let accepted = try await e2e.postRaw(try await e2e.v1Body(type: "DID_RENEW", owner: "device-pia", password: previous))
        XCTAssertEqual(accepted.status, 200, "the previous secret is accepted during the overlap: \(accepted.text)")

        // The operator revokes it (leaked, say) by deleting its file.
        try FileManager.default.removeItem(at: e2e.gw.harness.directory.appendingPathComponent("secrets/shared-secret-previous"))
        XCTAssertTrue(SecretFiles.shared.refreshNow(within: .seconds(10)))
        let refused = try await e2e.postRaw(try await e2e.v1Body(type: "DID_RENEW", owner: "device-pia", password: previous))
        XCTAssertEqual(refused.status, 401, "a deleted previous secret is not served from its last good value: \(refused.text)")
        XCTAssertEqual(refused.errorCode, "UNAUTHENTICATED")
        let current = try await e2e.postRaw(try await e2e.v1Body(type: "DID_RENEW", owner: "device-pia",
                                                                 password: e2e.gw.harness.sharedSecret))
        XCTAssertEqual(current.status, 200, "the current secret still serves: \(current.text)")
    }
}
