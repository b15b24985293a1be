import CommandLineSupport
import Foundation
import Gateway
import IAPConfig
import IAPCore

/// `iapgw reconcile`: one reconciliation pass (notification history, subscription statuses,
/// legacy receipts, consumption answers), then the inbox drained; prints one JSON summary line.
struct ReconcileCommand: Subcommand {
    let name = "reconcile"
    let summary = "fill notification gaps from Apple and re-read stale subscriptions, once"
    let usage = """
        usage: iapgw reconcile [--config DIR] [--mappings DIR] [--since ISO8601 | --hours N]
          --since   read notification history from this time (e.g. 2026-01-31T00:00:00Z)
          --hours   read notification history of the last N hours (default 24)
        """

    func run(_ args: inout CommandLineArguments) async throws -> Int32 {
        let config = URL(fileURLWithPath: try args.value("--config") ?? "Config", isDirectory: true)
        let mappings = URL(fileURLWithPath: try args.value("--mappings") ?? "Mappings", isDirectory: true)
        let sinceText = try args.value("--since")
        let hoursText = try args.value("--hours")
        try args.finish()
        guard sinceText == nil || hoursText == nil else { throw UsageError(message: "--since and --hours exclude each other") }
        var since: Int64?
        if let sinceText { since = try NotificationsCommand.parseTime(sinceText) }
        if let hoursText {
            guard let hours = Int64(hoursText), (1...4_320).contains(hours) else {
                throw UsageError(message: "--hours must be 1 to 4320")
            }
            since = Int64(Date().timeIntervalSince1970 * 1000) - hours * 3_600_000
        }
        let logger = Logger.standardError()
        let (_, parts) = try await GatewayAssembly.open(configDirectory: config, mappingsDirectory: mappings, logger: logger)
        let reconciler = try parts.reconciler(logger: logger)
        let start = since
        let report = await reconciler.reconcile(since: start) ?? ReconciliationReport()
        let drained = try await parts.notificationMaintenance().drain()
        guard case .object(var summary) = report.json else { return 1 }
        summary["inbox"] = NotificationMaintenance.json(drained)
        print(JSONValue.object(summary).jsonText)
        return report.failures.isEmpty && drained.failed == 0 ? 0 : 1
    }
}
