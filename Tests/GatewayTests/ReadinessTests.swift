import Dispatch
import Foundation
@testable import Gateway
import IAPConfig
import IAPCore
import Synchronization
import TestSupport
import XCTest

/// `/readyz` asks the owners what they know (SecretFiles' last reads), never a secret file itself:
/// a probe answers within its deadline while a secret read hangs, and a secret never read since
/// start makes the gateway not ready.
final class ReadinessTests: XCTestCase {
    /// The gateway's readiness over `files` (standing in for `SecretFiles.shared`), loaded with the app's secrets.
    private func readiness(_ gw: GatewayE2E, _ files: SecretFiles, logger: Logger = .disabled) -> ReadinessEndpoint {
        let parts = gw.harness.parts
        files.load(parts.apps.values.flatMap(\.secretFiles), logger: .disabled)
        return ReadinessEndpoint(apps: parts.apps, ledger: parts.ledger, environment: parts.environment,
                                 logger: logger, secrets: files)
    }

    func testASecretNotReadSinceStartIsNotReadyUntilARefreshReadsIt() async throws {
        let gw = try await GatewayE2E.start(self)
        let readable = Mutex(false)
        // The file is on disk all along; only SecretFiles' reads say whether it could be read.
        let files = SecretFiles(refreshInterval: .seconds(3600)) { url throws(VerificationError) in
            if url.lastPathComponent == "shared-secret", !readable.withLock({ $0 }) {
                throw VerificationError(.invalidConfiguration, "secret file:\(url.path) cannot be read or is empty")
            }
            return try SecretFiles.readFile(url)
        }
        let probe = readiness(gw, files)

        let notReady = try await probe.answer()
        XCTAssertEqual(notReady.status, 503)
        XCTAssertEqual(try StrictJSON().parse(notReady.body), .object(["status": "not ready", "reason": "configuration"]))

        readable.withLock { $0 = true }
        XCTAssertTrue(files.refreshNow(within: .seconds(10)))
        let ready = try await probe.answer()
        XCTAssertEqual(ready.status, 200, String(decoding: ready.body, as: UTF8.self))
    }

    func testAProbeAnswersWithinItsDeadlineWhileASecretReadHangsAndNeverReadsTheFile() async throws {
        let gw = try await GatewayE2E.start(self)
        let secret = gw.harness.directory.appendingPathComponent("secrets/shared-secret")
        let content = try Data(contentsOf: secret)
        let started = Mutex(false)
        let release = DispatchSemaphore(value: 0)
        // Read once at load; every later read hangs, as on a hung mount, until released.
        let files = SecretFiles(refreshInterval: .seconds(3600)) { url throws(VerificationError) in
            guard url == secret else { return try SecretFiles.readFile(url) }
            if started.withLock({ let was = $0; $0 = true; return was }) { release.wait() }
            return content
        }
        let probe = readiness(gw, files)
        defer { for _ in 0..<10 { release.signal() } }
        // The file gone from disk as well: a probe that looked at the disk would say not ready.
        try FileManager.default.moveItem(at: secret, to: secret.appendingPathExtension("away"))
        XCTAssertFalse(files.refreshNow(within: .milliseconds(200)), "the refresh hangs on the read")

        let begun = ContinuousClock.now
        let answer = try await probe.answer()
        XCTAssertLessThan(ContinuousClock.now - begun, .seconds(5), "the probe waited for a hung read")
        XCTAssertEqual(answer.status, 200, "the secret read at start still serves: \(String(decoding: answer.body, as: UTF8.self))")
    }
}
