import Foundation
import Gateway
import IAPCore
import TestSupport
import XCTest

/// A start's blocking work (files, the ledger's database) runs on a thread of its own with a
/// deadline, as `iapgw serve` and the other commands that build a gateway do it.
final class StartupOffPoolTests: XCTestCase {
    func testStartupWorkRunsOnAThreadOfItsOwn() async throws {
        let name = try await GatewayAssembly.offPool { () throws(VerificationError) -> String in
            (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        }
        XCTAssertEqual(name, "startup.0")
    }

    func testStuckStartIsRefusedAtItsDeadlineWhileTheWorkIsStillStuck() async throws {
        let gate = DispatchSemaphore(value: 0)
        defer { gate.signal() }
        do throws(VerificationError) {
            _ = try await GatewayAssembly.offPool(deadline: .milliseconds(100)) { () throws(VerificationError) -> Int in
                gate.wait()
                return 1
            }
            XCTFail("a start stuck in its work was answered with the work's result")
        } catch {
            XCTAssertEqual(error.code, .storageUnavailable)
        }
    }

    func testOpenReadsTheConfigurationAndOpensTheLedger() async throws {
        let gw = try await GatewayE2E.start(self)
        let mappings = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Mappings")
        let (assembly, parts) = try await GatewayAssembly.open(configDirectory: gw.harness.directory,
                                                               mappingsDirectory: mappings, logger: .disabled)
        XCTAssertEqual(Array(assembly.configuration.apps.keys), [gw.bundleId])
        let history = try await parts.audit(bundleId: gw.bundleId, subject: .transaction("2000000000000001"), since: 0, limit: 10)
        XCTAssertNotNil(history.objectValue, "the ledger opened off the pool does not answer")
    }

    func testOpeningAMissingConfigurationFails() async {
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("iapgw-missing-\(UUID().uuidString)")
        do throws(VerificationError) {
            _ = try await GatewayAssembly.open(configDirectory: missing, mappingsDirectory: missing, logger: .disabled)
            XCTFail("a missing configuration opened")
        } catch {
            XCTAssertEqual(error.code, .invalidConfiguration)
        }
    }
}
