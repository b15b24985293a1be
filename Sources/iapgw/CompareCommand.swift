import CommandLineSupport
import Dispatch
import Foundation
import Gateway
import IAPConfig
import IAPCore

/// `iapgw compare`: a backlog of stored receipts through both generations, each comparison stored
/// in the ledger; resumable (the state file), interruptible (Ctrl-C stops launching and keeps
/// what is done).
struct CompareCommand: Subcommand {
    let name = "compare"
    let summary = "compare verifyReceipt and the Server API on a backlog of receipts (migration check)"
    let usage = """
        usage: iapgw compare --app BUNDLE --input receipts.jsonl [--concurrency N] [--config DIR] [--mappings DIR]
                             [--json report.json] [--report report.html] [--csv findings.csv] [--state FILE]
          --input        one JSON object per line: {"receipt": "<base64>", "account": "..."} (account optional)
          --concurrency  receipts in flight at once, 1 to 256 (default 4)
          --json         write the summary (counts by class, comparison ids) as JSON
          --report       write the migration report (the dashboard's page: verdict, cutover impact, failures,
                         charts, side-by-side table) for every comparison stored for the app
          --csv          write every disagreement (one row per finding) and path failure stored for the app as CSV
          --state        where compared receipts are remembered for resuming (default <input>.state)
        exit: 0 every receipt compared, 1 refused input or storage failure, 130 interrupted (run again to resume)
        """

    func run(_ args: inout CommandLineArguments) async throws -> Int32 {
        guard let bundleId = try args.value("--app") else { throw UsageError(message: "--app is required") }
        guard let input = try args.value("--input") else { throw UsageError(message: "--input is required") }
        let config = URL(fileURLWithPath: try args.value("--config") ?? "Config", isDirectory: true)
        let mappings = URL(fileURLWithPath: try args.value("--mappings") ?? "Mappings", isDirectory: true)
        let concurrencyText = try args.value("--concurrency")
        let jsonPath = try args.value("--json")
        let reportPath = try args.value("--report")
        let csvPath = try args.value("--csv")
        let statePath = try args.value("--state") ?? input + ".state"
        try args.finish()
        var options = BatchComparer.Options()
        if let concurrencyText {
            guard let n = Int(concurrencyText), (1...256).contains(n) else { throw UsageError(message: "--concurrency must be 1 to 256") }
            options.concurrency = n
        }
        options.stateFile = URL(fileURLWithPath: statePath)

        let inputFile = URL(fileURLWithPath: input)
        let receipts = try await GatewayAssembly.offPool { () throws(VerificationError) in try BatchReceipt.readJSONLines(inputFile) }
        let (_, parts) = try await GatewayAssembly.open(configDirectory: config, mappingsDirectory: mappings,
                                                        logger: Logger.standardError(minimumLevel: .warning))
        let comparer = try parts.batchComparer(bundleId: bundleId, options: options)
        let printer = BatchProgressPrinter.standardOutput()
        let summary = try await Self.runInterruptibly { try await comparer.run(receipts) { printer.update($0, final: $1) } }

        print(summary.text)
        let report = try await parts.migrationReport(bundleId: bundleId)
        print(report.verdictText)
        if let jsonPath {
            guard FileManager.default.createFile(atPath: jsonPath, contents: Data((summary.json.jsonText + "\n").utf8)) else {
                throw VerificationError(.storageUnavailable, "cannot write \(jsonPath)")
            }
        }
        for (path, text) in [(reportPath, { MigrationReportHTML.render(report) }), (csvPath, { MigrationReportCSV.render(report) })] {
            guard let path else { continue }
            guard FileManager.default.createFile(atPath: path, contents: Data(text().utf8)) else {
                throw VerificationError(.storageUnavailable, "cannot write \(path)")
            }
        }
        return summary.interrupted ? 130 : 0
    }

    /// Runs the batch; the first SIGINT or SIGTERM cancels it (the summary still comes back).
    private static func runInterruptibly(_ body: @escaping @Sendable () async throws -> BatchSummary) async throws -> BatchSummary {
        let task = Task { try await body() }
        let queue = DispatchQueue(label: "iapgw.compare.signals")
        let sources = [SIGINT, SIGTERM].map { sig in
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler { task.cancel() }
            source.resume()
            return source
        }
        defer { sources.forEach { $0.cancel() } }
        return try await task.value
    }
}
