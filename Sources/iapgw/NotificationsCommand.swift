import CommandLineSupport
import Foundation
import Gateway
import IAPConfig
import IAPCore

/// `iapgw notifications replay|purge`: operator actions on the notification inbox.
struct NotificationsCommand: Subcommand {
    let name = "notifications"
    let summary = "replay stored notifications through the state machine, or purge old raw bodies"
    let usage = """
        usage: iapgw notifications replay --since ISO8601 [--bundle-id ID] [--config DIR] [--mappings DIR]
               iapgw notifications purge --older-than-days N [--config DIR] [--mappings DIR]
          replay  makes notifications signed since then pending again and applies them (idempotent)
          purge   drops raw bodies received more than N days ago (parsed rows stay)
        """

    func run(_ args: inout CommandLineArguments) async throws -> Int32 {
        // Options first: a positional read earlier would take an option's value for the action.
        let config = URL(fileURLWithPath: try args.value("--config") ?? "Config", isDirectory: true)
        let mappings = URL(fileURLWithPath: try args.value("--mappings") ?? "Mappings", isDirectory: true)
        let sinceText = try args.value("--since")
        let bundleId = try args.value("--bundle-id")
        let daysText = try args.value("--older-than-days")
        guard let action = args.positional(), ["replay", "purge"].contains(action) else {
            throw UsageError(message: "replay or purge")
        }
        try args.finish()
        let logger = Logger.standardError()
        func makeMaintenance() async throws -> NotificationMaintenance {
            try await GatewayAssembly.open(configDirectory: config, mappingsDirectory: mappings, logger: logger).1
                .notificationMaintenance()
        }
        if action == "replay" {
            guard let sinceText else { throw UsageError(message: "replay needs --since") }
            guard daysText == nil else { throw UsageError(message: "--older-than-days is for purge") }
            let since = try Self.parseTime(sinceText)
            let (reset, report) = try await makeMaintenance().replay(since: since, bundleId: bundleId)
            guard case .object(var summary) = NotificationMaintenance.json(report) else { return 1 }
            summary["reset"] = .int(Int64(reset))
            print(JSONValue.object(summary).jsonText)
            return report.failed == 0 ? 0 : 1
        }
        guard sinceText == nil, bundleId == nil else { throw UsageError(message: "--since and --bundle-id are for replay") }
        guard let daysText, let days = Int64(daysText), (1...3_650).contains(days) else {
            throw UsageError(message: "purge needs --older-than-days 1 to 3650")
        }
        let purged = try await makeMaintenance().purge(olderThanDays: days)
        print(JSONValue.object(["purged": .int(Int64(purged)), "olderThanDays": .int(days)]).jsonText)
        return 0
    }

    /// ISO 8601 with a zone (`2026-01-31T00:00:00Z`, fractional seconds allowed) → ms since 1970.
    static func parseTime(_ text: String) throws -> Int64 {
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return Int64(date.timeIntervalSince1970 * 1000) }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return Int64(date.timeIntervalSince1970 * 1000) }
        throw UsageError(message: "\(text.prefix(64)) is not an ISO 8601 time with a zone (2026-01-31T00:00:00Z)")
    }
}
