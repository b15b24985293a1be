import AppStoreSimulator
import Demo
import Foundation
@testable import Gateway
import IAPCore
import Ledger
import Synchronization
import TestSupport
import XCTest

/// `iapgw compare`'s engine over a few hundred simulator receipts: progress, interruption and
/// resume, and a JSON report whose numbers are the stored comparisons'.
final class BatchComparerTests: XCTestCase {
    private struct Backlog {
        let gw: GatewayE2E
        let receipts: [BatchReceipt]
        let planted: Int
        let stateFile: URL
    }

    /// 200 consistent purchases, 4 of them with a planted discrepancy.
    private func backlog(count: Int = 200) async throws -> Backlog {
        let gw = try await GatewayE2E.start(self) { $0.receiptRouting = "compare" }
        let purchases = try gw.simulator.makeConsistentPurchases(count: count, bundleId: gw.bundleId, ownerPrefix: "backlog")
        try gw.simulator.plant(.refundOnlyInServerAPI, transactionId: purchases[7].transactionId)
        try gw.simulator.plant(.differentExpiresDate(.legacy, offsetSeconds: 600), transactionId: purchases[40].transactionId)
        try gw.simulator.plant(.differentProduct(.serverAPI, productId: "\(gw.bundleId).other"), transactionId: purchases[101].transactionId)
        try gw.simulator.plant(.refundOnlyInLegacy, transactionId: purchases[150].transactionId)
        let receipts = purchases.enumerated().map { BatchReceipt(receipt: $1.receiptBase64, account: "acct-\($0)", line: $0 + 1) }
        return Backlog(gw: gw, receipts: receipts, planted: 4,
                       stateFile: gw.harness.directory.appendingPathComponent("receipts.jsonl.state"))
    }

    private func comparer(_ b: Backlog, concurrency: Int = 8) throws -> BatchComparer {
        var options = BatchComparer.Options()
        options.concurrency = concurrency
        options.stateFile = b.stateFile
        return try b.gw.harness.parts.batchComparer(bundleId: b.gw.bundleId, options: options)
    }

    private func ledger(_ b: Backlog) throws -> SQLLedger { b.gw.harness.parts.storedLedger }

    /// The report's numbers against the ledger's own counts and queries.
    private func assertReportMatchesStoredComparisons(_ summary: BatchSummary, _ b: Backlog,
                                                      file: StaticString = #filePath, line: UInt = #line) throws {
        let report = try StrictJSON().parse(summary.json.jsonText)
        let ledger = try ledger(b)
        let counts = try ledger.comparisonCounts(bundleId: b.gw.bundleId, from: nil, to: nil)
        let stored = try ledger.comparisons(ComparisonQuery(bundleId: b.gw.bundleId, limit: 1000))
        XCTAssertEqual(report["total"], .int(Int64(counts.total)), file: file, line: line)
        XCTAssertEqual(report["agreed"], .int(Int64(counts.agreed)), file: file, line: line)
        XCTAssertEqual(report["disagreed"], .int(Int64(stored.filter { !$0.differences.isEmpty && $0.legacyError == nil && $0.serverAPIError == nil }.count)),
                       file: file, line: line)
        XCTAssertEqual(report["failed"], .int(Int64(stored.filter { $0.legacyError != nil || $0.serverAPIError != nil }.count)),
                       file: file, line: line)
        for kind in ComparisonDifference.Kind.allCases {
            let n = try ledger.comparisons(ComparisonQuery(bundleId: b.gw.bundleId, kind: kind, limit: 1000)).count
            XCTAssertEqual(report["disagreedByKind"]?[kind.rawValue] ?? .int(0), .int(Int64(n)), kind.rawValue, file: file, line: line)
        }
        XCTAssertEqual(Set(report["comparisonIds"]?.arrayValue?.compactMap(\.stringValue) ?? []), Set(stored.map(\.id)),
                       file: file, line: line)
    }

    func testTwoHundredReceiptsPrintPlainProgressLinesAndAReportMatchingTheStoredComparisons() async throws {
        let b = try await backlog()
        let lines = Mutex<[String]>([])
        let printer = BatchProgressPrinter(isTerminal: false, interval: 0) { text in lines.withLock { $0.append(text) } }

        let summary = try await comparer(b).run(b.receipts) { printer.update($0, final: $1) }

        XCTAssertEqual(summary.total, 200)
        XCTAssertEqual(summary.compared, 200)
        XCTAssertEqual(summary.skipped, 0)
        XCTAssertFalse(summary.interrupted)
        XCTAssertEqual(summary.disagreed, b.planted)
        XCTAssertEqual(summary.agreed, 200 - b.planted)
        XCTAssertEqual(summary.failed, 0, "\(summary.failedByCode)")
        XCTAssertEqual(summary.disagreedByKind, ["entitlementMismatch": 2, "expiryMismatch": 1, "fieldMismatch": 1])
        let printed = lines.withLock { $0 }
        XCTAssertTrue(printed.allSatisfy { $0.hasSuffix("\n") && !$0.contains("\r") }, "plain lines, no bar, when not a terminal")
        XCTAssertTrue(printed.first?.hasPrefix("0/200 (0%)") == true, printed.first ?? "")
        XCTAssertTrue(printed.last?.hasPrefix("200/200 (100%) agreed 196 disagreed 4 failed 0 skipped 0") == true, printed.last ?? "")
        XCTAssertTrue(printed.contains { $0.hasPrefix("100/200 (50%)") && $0.contains("/s · ETA ") }, "counts, rate and ETA")
        try assertReportMatchesStoredComparisons(summary, b)
        print(summary.text)

        XCTAssertTrue(summary.text.contains("200 receipt(s), one comparison each: 196 agreed"), "the summary says what it counts")
        XCTAssertTrue(summary.text.contains("  comparisons with entitlementMismatch: 2"), summary.text)

        // What `iapgw compare` prints after the batch and `--report` renders: the cutover impact.
        let report = try await b.gw.harness.parts.migrationReport(bundleId: b.gw.bundleId)
        XCTAssertEqual(report.impact.map { "\($0.change.rawValue) \($0.account ?? "-")" },
                       ["losesAccess acct-7", "gainsAccess acct-150", "differentExpiry acct-40"])
        let text = report.verdictText
        XCTAssertTrue(text.hasPrefix("verdict (Production, over distinct purchase chains): not ready"), text)
        XCTAssertTrue(text.contains("if you cut over now: 1 purchase(s) would lose access, 1 would gain access, 1 would see another expiry"), text)
        XCTAssertTrue(text.contains("  losesAccess: account acct-7, "), text)
        let html = MigrationReportHTML.render(report)
        XCTAssertTrue(html.contains("<table id=\"impact-accounts\">"))
        print(text)
    }

    func testAnInterruptedBatchResumesSkippingTheReceiptsAlreadyCompared() async throws {
        let b = try await backlog()
        let first = try comparer(b)
        let running = Mutex<Task<BatchSummary, any Error>?>(nil)
        let task = Task {
            try await first.run(b.receipts) { progress, _ in
                if progress.compared >= 60 { running.withLock { $0?.cancel() } }
            }
        }
        running.withLock { $0 = task }
        let interrupted = try await task.value
        XCTAssertTrue(interrupted.interrupted)
        XCTAssertGreaterThanOrEqual(interrupted.compared, 60)
        XCTAssertLessThan(interrupted.compared, 200, "cancelled before the end")
        let storedAfterInterruption = try ledger(b).comparisonCounts(bundleId: b.gw.bundleId, from: nil, to: nil)
        XCTAssertEqual(storedAfterInterruption.total, interrupted.compared, "every receipt counted was stored, no more")

        let resumed = try await comparer(b).run(b.receipts)

        XCTAssertFalse(resumed.interrupted)
        XCTAssertEqual(resumed.skipped, interrupted.compared)
        XCTAssertEqual(resumed.compared, 200 - interrupted.compared)
        XCTAssertEqual(resumed.total, 200)
        XCTAssertEqual(resumed.agreed + resumed.disagreed + resumed.failed, 200)
        XCTAssertEqual(resumed.disagreed, b.planted)
        XCTAssertEqual(try ledger(b).comparisonCounts(bundleId: b.gw.bundleId, from: nil, to: nil).total, 200,
                       "no receipt compared twice")
        try assertReportMatchesStoredComparisons(resumed, b)

        let again = try await comparer(b).run(b.receipts)
        XCTAssertEqual(again.skipped, 200)
        XCTAssertEqual(again.compared, 0)
        XCTAssertEqual(again.disagreed, b.planted)
    }

    func testInputLinesAreReadStrictlyWithTheLineNumberOfABadOne() throws {
        let good = try BatchReceipt.parseJSONLines(Data("{\"receipt\":\"QUJD\",\"account\":\"a\"}\n\n{\"receipt\":\"REVG\"}\n".utf8))
        XCTAssertEqual(good, [BatchReceipt(receipt: "QUJD", account: "a", line: 1), BatchReceipt(receipt: "REVG", line: 3)])
        XCTAssertThrowsError(try BatchReceipt.parseJSONLines(Data("{\"receipt\":\"QUJD\"}\n{\"receipt\":\"QUJD\",\"receipt\":\"x\"}\n".utf8))) {
            let error = $0 as? VerificationError
            XCTAssertEqual(error?.code, .duplicateJSONKey)
            XCTAssertTrue(error?.message.hasPrefix("input line 2:") == true, error?.message ?? "")
        }
        XCTAssertThrowsError(try BatchReceipt.parseJSONLines(Data("{\"receipt\":\"QUJD\",\"nonce\":\"n\"}\n".utf8))) {
            XCTAssertEqual(($0 as? VerificationError)?.code, .malformedRequest)
        }
        XCTAssertThrowsError(try BatchReceipt.parseJSONLines(Data("{\"receipt\":7}\n".utf8))) {
            XCTAssertEqual(($0 as? VerificationError)?.code, .invalidFieldType)
        }
    }
}
