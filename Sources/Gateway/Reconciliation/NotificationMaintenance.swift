import Foundation
import IAPConfig
import IAPCore
import Ledger

/// Operator actions on the notification inbox, shared by the CLI and tests.
public enum NotificationMaintenance {
    /// Applies every due inbox entry through the state machine until nothing is left that can be
    /// applied now (entries waiting for a retry stay).
    @discardableResult
    public static func drain(service: GatewayService, apps: [String: AppPolicy]? = nil) async throws(VerificationError) -> ProcessReport {
        let processor = NotificationProcessor(apps: apps ?? service.apps, ledger: service.ledger, logger: service.logger,
                                              now: service.now)
        var total = ProcessReport()
        while true {
            let report = try await processor.drain()
            total.processed += report.processed
            total.failed += report.failed
            total.unknown += report.unknown
            total.parked += report.parked
            if report.processed + report.failed == 0 { return total }
        }
    }

    /// Makes the entries signed at or after `since` pending again (one app, or every app) and
    /// drains them. The state machine ignores what is not newer than the state, so a replay leaves
    /// right state unchanged and repairs state a bug once got wrong.
    public static func replay(service: GatewayService, since: Int64, bundleId: String? = nil)
        async throws(VerificationError) -> (reset: Int, report: ProcessReport) {
        let bundles = bundleId.map { [$0] } ?? service.apps.keys.sorted()
        if let bundleId, service.apps[bundleId] == nil {
            throw VerificationError(.unknownApp, "no app \(bundleId.prefix(200)) is configured")
        }
        var reset = 0
        for bundle in bundles { reset += try await service.ledger.markForReplay(bundleId: bundle, since: since) }
        return (reset, try await drain(service: service))
    }

    /// Drops raw notification bodies received more than `days` days ago (the parsed rows stay).
    public static func purge(service: GatewayService, olderThanDays days: Int64) async throws(VerificationError) -> Int {
        guard (1...3_650).contains(days) else {
            throw VerificationError(.invalidConfiguration, "the retention is 1 to 3650 days")
        }
        return try await ReconciliationSchedule.purge(service.ledger, days: days, now: service.now())
    }

    public static func json(_ report: ProcessReport) -> JSONValue {
        .object(["processed": .int(Int64(report.processed)), "failed": .int(Int64(report.failed)),
                 "unknown": .int(Int64(report.unknown)), "parked": .int(Int64(report.parked))])
    }
}
