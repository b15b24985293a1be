import Foundation
import IAPConfig
import IAPCore
import Ledger

/// Operator actions on the notification inbox, shared by the CLI and tests
/// (`GatewayParts.notificationMaintenance`).
public struct NotificationMaintenance: Sendable {
    let apps: [String: AppPolicy]
    let ledger: any NotificationLedger
    let logger: Logger
    let now: @Sendable () -> Int64

    /// Applies every due inbox entry through the state machine until nothing is left that can be
    /// applied now (entries waiting for a retry stay).
    @discardableResult
    public func drain() async throws(VerificationError) -> ProcessReport {
        let processor = NotificationProcessor(apps: apps, ledger: ledger, logger: logger, now: now)
        var total = try await processor.drain()
        var last = total
        while last.processed + last.failed > 0 {
            last = try await processor.drain()
            total.add(last)
        }
        return total
    }

    /// Makes the entries signed at or after `since` pending again (one app, or every app) and
    /// drains them. The state machine ignores what is not newer than the state, so a replay leaves
    /// right state unchanged and repairs state a bug once got wrong.
    public func replay(since: Int64, bundleId: String? = nil)
        async throws(VerificationError) -> (reset: Int, report: ProcessReport) {
        let bundles = bundleId.map { [$0] } ?? apps.keys.sorted()
        if let bundleId { _ = try apps.app(bundleId) }
        var reset = 0
        for bundle in bundles { reset += try await ledger.markForReplay(bundleId: bundle, since: since) }
        return (reset, try await drain())
    }

    /// Drops raw notification bodies received more than `days` days ago (the parsed rows stay).
    public func purge(olderThanDays days: Int64) async throws(VerificationError) -> Int {
        guard (1...3_650).contains(days) else {
            throw VerificationError(.invalidConfiguration, "the retention is 1 to 3650 days")
        }
        return try await ReconciliationSchedule.purge(ledger, days: days, now: now())
    }

    public static func json(_ report: ProcessReport) -> JSONValue {
        .object(["processed": .int(Int64(report.processed)), "failed": .int(Int64(report.failed)),
                 "unknown": .int(Int64(report.unknown)), "parked": .int(Int64(report.parked))])
    }
}
