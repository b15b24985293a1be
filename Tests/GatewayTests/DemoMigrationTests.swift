import Foundation
import XCTest

/// `iapgw-dev demo --once` (what `Scripts/demo.sh --once` runs), as the built binary: besides the
/// purchase flows it must show the migration — receipts in shadow, a planted disagreement, a batch
/// compare — and check that the dashboard states a verdict listing that disagreement.
final class DemoMigrationTests: XCTestCase {
    func testDemoOnceShowsTheMigrationAndTheDashboardListsThePlantedDisagreement() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapgw-demo-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathExtension("out")
        FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let process = Process()
        process.executableURL = GatewayProcess.devBinary
        process.arguments = ["demo", "--once", "--port", "0", "--sim-port", "0", "--dir", directory.path]
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = FileHandle.nullDevice
        try process.run()
        let timeout = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 120, execute: timeout)
        process.waitUntilExit()
        timeout.cancel()
        let text = try String(contentsOf: output, encoding: .utf8)

        XCTAssertEqual(process.terminationStatus, 0, text)
        XCTAssertTrue(text.contains("ok   frank's receipt (shadow): HTTP 200 granted"), text)
        XCTAssertTrue(text.contains("migration: iapgw compare over a backlog of 3 stored receipts"), text)
        XCTAssertTrue(text.contains("  losesAccess: account frank, com.example.demo.removeads, active -> refunded"), text)
        XCTAssertTrue(text.contains("dashboard: http://127.0.0.1:"), text)
        XCTAssertTrue(text.contains("curl -s -H 'Authorization: Bearer "), text)
        XCTAssertTrue(text.contains("ok   bob's support history: HTTP 200"), text)
        XCTAssertTrue(text.contains("     2 attempt(s), 1 purchase chain(s)"), text)
        XCTAssertTrue(text.contains("ok   the dashboard states a verdict: not ready"), text)
        XCTAssertTrue(text.contains("ok   the dashboard lists the planted disagreement"), text)
    }
}
