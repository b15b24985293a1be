import Foundation
@testable import Gateway
import IAPCore
import Ledger
import TestSupport
import XCTest

/// GET /dashboard over the demo deployment, and the page it serves rendered by a real headless
/// Chromium. Chromium cannot send an Authorization header from the command line and the key must
/// never go in a URL, so the test fetches the page with the key (as an operator's browser or curl
/// would) and hands Chromium exactly those bytes as a file.
final class DashboardTests: XCTestCase {
    private typealias F = ReportFixtures

    /// The planted comparisons and 142 agreeing ones, stored in the deployment's own ledger file.
    private func plant(_ gw: GatewayE2E) throws -> [PurchaseComparison] {
        let ledger = try SQLLedger(storage: gw.sqlitePath)
        var failed = F.agreed(1, at: F.day1 + 2 * F.dayMillis, prefix: "down")[0]
        failed.serverAPIError = "UPSTREAM_UNAVAILABLE"
        failed.purchases[0].serverAPIState = nil
        let all = (F.agreed(96, at: F.day1, prefix: "a") + F.agreed(46, at: F.day1 + F.dayMillis, prefix: "b") + F.planted + [failed])
            .map { c -> PurchaseComparison in var c = c; c.bundleId = gw.bundleId; return c }
        for c in all { try ledger.recordComparison(c) }
        return all
    }

    private func dashboard(_ gw: GatewayE2E, _ query: String? = nil, apiKey: String?? = .none) async throws -> GatewayAnswer {
        try await gw.send("GET", "\(gw.harness.gatewayURL)/dashboard?\(query ?? "app=\(gw.bundleId)")", apiKey: apiKey)
    }

    func testDashboardNeedsTheAppsAPIKey() async throws {
        let gw = try await GatewayE2E.start(self)
        _ = try plant(gw)

        let anonymous = try await dashboard(gw, apiKey: .some(nil))
        let wrong = try await dashboard(gw, apiKey: "not-the-key")
        let noApp = try await dashboard(gw, "")

        XCTAssertEqual(anonymous.status, 401)
        XCTAssertEqual(anonymous.errorCode, "UNAUTHENTICATED")
        XCTAssertEqual(wrong.status, 401)
        XCTAssertFalse(wrong.text.contains("2000000000000101"))
        XCTAssertEqual(noApp.status, 400)
    }

    func testDashboardServesTheReportOfTheStoredComparisons() async throws {
        let gw = try await GatewayE2E.start(self)
        let planted = try plant(gw)

        let answer = try await dashboard(gw)

        // As the ledger reads them back (it adds the products the differences name to each comparison's).
        let stored = try await XCTUnwrap(gw.harness.parts.comparisons).comparisons(ComparisonQuery(bundleId: gw.bundleId, limit: 1000))
        XCTAssertEqual(Set(stored.map(\.id)), Set(planted.map(\.id)))
        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.headers["content-type"], "text/html; charset=utf-8")
        XCTAssertEqual(answer.headers["content-security-policy"], MigrationReportHTML.contentSecurityPolicy)
        XCTAssertEqual(answer.text, MigrationReportHTML.render(MigrationReport(
            bundleId: gw.bundleId, comparisons: stored, criteria: ReadinessCriteria(app: try XCTUnwrap(gw.harness.service.apps[gw.bundleId])))))
        XCTAssertTrue(answer.text.contains("not ready"))
    }

    func testDashboardExportsFindingsAndFailuresAsCSV() async throws {
        let gw = try await GatewayE2E.start(self)
        _ = try plant(gw)

        let csv = try await dashboard(gw, "app=\(gw.bundleId)&format=csv")
        let other = try await dashboard(gw, "app=\(gw.bundleId)&format=pdf")

        XCTAssertEqual(csv.status, 200, csv.text)
        XCTAssertEqual(csv.headers["content-type"], "text/csv; charset=utf-8")
        let rows = csv.text.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        XCTAssertEqual(rows.filter { $0.hasPrefix("\"disagreement\"") }.count, 4)
        XCTAssertEqual(rows.filter { $0.hasPrefix("\"failure\"") }.count, 1)
        XCTAssertEqual(other.status, 400)
    }

    func testDashboardPagesThroughMoreComparisonsThanOneLedgerQueryAnswers() async throws {
        let ledger = try SQLLedger(storage: FileManager.default.temporaryDirectory
            .appendingPathComponent("dash-\(UUID().uuidString).sqlite").path)
        // 2,500 comparisons, five per millisecond, so page boundaries fall inside a millisecond.
        for i in 0..<2_500 {
            var c = F.agreed(1, at: F.day1 + Int64(i / 5), prefix: "p\(i)")[0]
            c.id = "p\(i)"
            try ledger.recordComparison(c)
        }

        let loaded = try await DashboardEndpoint.load(F.app, from: nil, to: nil, ledger: AsyncSQLLedger(ledger))

        XCTAssertEqual(loaded.comparisons.count, 2_500)
        XCTAssertEqual(Set(loaded.comparisons.map(\.id)).count, 2_500)
        XCTAssertFalse(loaded.truncated)
    }

    func testDashboardRendersInHeadlessChromiumWithChartsAndThePlantedDiscrepancies() async throws {
        let chromium = try XCTUnwrap(Self.chromiumPath(),
                                     "chromium is required for this test (CI installs it: apt-get install -y chromium)")
        let gw = try await GatewayE2E.start(self)
        _ = try plant(gw)
        let answer = try await dashboard(gw)
        XCTAssertEqual(answer.status, 200, answer.text)

        let output = Self.testOutput
        try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)
        let page = output.appendingPathComponent("dashboard.html")
        try Data(answer.body).write(to: page)
        let screenshot = output.appendingPathComponent("dashboard.png")
        try? FileManager.default.removeItem(at: screenshot)

        let dom = try Self.runChromium(chromium, ["--dump-dom", page.absoluteString])
        XCTAssertEqual(dom.status, 0, dom.stderr)
        XCTAssertTrue(dom.stdout.contains("<svg id=\"per-day\""), "per-day chart in the DOM")
        XCTAssertTrue(dom.stdout.contains("<svg id=\"by-class\""), "by-class chart in the DOM")
        XCTAssertTrue(dom.stdout.contains("<svg id=\"by-field\""), "by-field chart in the DOM")
        XCTAssertTrue(dom.stdout.contains("<table id=\"side-by-side\""))
        for planted in ["2000000000000101", "2000000000000102", "2000000000000103", "2000000000000104"] {
            XCTAssertTrue(dom.stdout.contains("<td class=\"id\">\(planted)</td>"), "side-by-side row for \(planted)")
        }
        XCTAssertTrue(dom.stdout.contains("<div id=\"verdict\" class=\"verdict not-ready\">"), "the verdict")
        XCTAssertTrue(dom.stdout.contains("<li>2 account(s) would lose access at cutover (none allowed)</li>"), "its unmet criteria")
        XCTAssertTrue(dom.stdout.contains("<table id=\"impact-accounts\">"), "the cutover impact table")
        XCTAssertTrue(dom.stdout.contains("<section id=\"failures\">") && dom.stdout.contains("UPSTREAM_UNAVAILABLE"),
                      "the failures section")
        // With --log-level=0 Chromium logs every console message (a CSP violation, a failed load, a
        // script error) as an INFO:CONSOLE line; this page must produce none.
        XCTAssertEqual(dom.stderr.split(separator: "\n").filter { $0.contains(":CONSOLE") }, [], "the page logged to the console")

        let shot = try Self.runChromium(chromium, ["--screenshot=\(screenshot.path)", "--window-size=1280,2000", page.absoluteString])
        XCTAssertEqual(shot.status, 0, shot.stderr)
        let size = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: screenshot.path)[.size] as? Int)
        XCTAssertGreaterThan(size, 10_000, "a blank page compresses far below 10 KB")
    }

    // MARK: Chromium

    /// <package>/.build/test-output, found from this file so it does not depend on the working directory.
    static var testOutput: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/test-output", isDirectory: true)
    }

    static func chromiumPath() -> String? {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs headless Chromium with its own throwaway profile; killed after 60 s.
    static func runChromium(_ path: String, _ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("chromium-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let out = scratch.appendingPathComponent("stdout"), err = scratch.appendingPathComponent("stderr")
        FileManager.default.createFile(atPath: out.path, contents: nil)
        FileManager.default.createFile(atPath: err.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        // --no-sandbox: CI runs as root, where Chromium refuses its sandbox.
        process.arguments = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                             "--user-data-dir=\(scratch.appendingPathComponent("profile").path)",
                             "--enable-logging=stderr", "--log-level=0"] + arguments
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = scratch.path
        process.environment = environment
        try process.run()
        let timeout = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 60, execute: timeout)
        process.waitUntilExit()
        timeout.cancel()
        let stdout = (try? String(contentsOf: out, encoding: .utf8)) ?? ""
        let stderr = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
        if process.terminationReason == .uncaughtSignal {
            XCTFail("chromium did not finish within 60 s or crashed: \(stderr.suffix(2000))")
        }
        return (process.terminationStatus, stdout, stderr)
    }
}
