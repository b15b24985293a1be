import Foundation
import IAPConfig
import IAPCore
import Ledger

/// The periodic work of `serve` beside the inbox worker: a reconciliation pass every
/// `background.reconcileIntervalSeconds` (default 900, first pass one interval after start; 0 turns
/// it off), and once a day the raw notification bodies older than
/// `background.notificationRetentionDays` (default 30) and the audit records older than
/// `background.auditRetentionDays` (default 400) are purged, as are the answers stored under
/// `Idempotency-Key`s past their `background.idempotencyKeyHours` (the gateway config's settings,
/// overridden by the environment: `GatewayConfig.Background.overridden(by:)`).
public struct ReconciliationSchedule: Sendable {
    let reconciler: Reconciler
    let ledger: any Ledger & NotificationLedger
    let intervalSeconds: Int64
    let retentionDays: Int64
    let auditRetentionDays: Int64
    let logger: Logger
    let now: @Sendable () -> Int64

    public init(reconciler: Reconciler, ledger: any Ledger & NotificationLedger, settings: GatewayConfig.Background, logger: Logger,
                now: @escaping @Sendable () -> Int64) {
        self.reconciler = reconciler
        self.ledger = ledger
        intervalSeconds = settings.reconcileIntervalSeconds
        retentionDays = settings.notificationRetentionDays
        auditRetentionDays = settings.auditRetentionDays
        self.logger = logger
        self.now = now
    }

    /// Drops raw bodies received more than `days` days before now; returns how many.
    public static func purge(_ ledger: any NotificationLedger, days: Int64, now: Int64) async throws(VerificationError) -> Int {
        try await ledger.purgeRawBodies(olderThan: now - days * 86_400_000)
    }

    /// Deletes audit records made more than `days` days before now; returns how many.
    public static func purgeAudit(_ ledger: any Ledger, days: Int64, now: Int64) async throws(VerificationError) -> Int {
        try await ledger.purgeAudit(olderThan: now - days * 86_400_000)
    }

    public func run() async {
        var lastPurge: Int64?
        while !Task.isCancelled {
            if lastPurge.map({ now() - $0 >= 86_400_000 }) ?? true {
                do {
                    let purged = try await Self.purge(ledger, days: retentionDays, now: now())
                    logger.info("notification_bodies_purged", ["count": String(purged), "retentionDays": String(retentionDays)])
                    let audits = try await Self.purgeAudit(ledger, days: auditRetentionDays, now: now())
                    logger.info("audit_records_purged", ["count": String(audits), "retentionDays": String(auditRetentionDays)])
                    let answers = try await ledger.purgeIdempotentAnswers(expiredBy: now())
                    logger.info("idempotent_answers_purged", ["count": String(answers)])
                    lastPurge = now()
                } catch {
                    logger.error("retention_purge_failed", ["code": error.code.rawValue])
                }
            }
            // The first pass waits one interval: a restarted gateway is not a reason to call Apple
            // at once (`iapgw reconcile` is the immediate pass), and the window read covers the gap.
            try? await Task.sleep(for: .seconds(intervalSeconds > 0 ? intervalSeconds : 3_600))
            if intervalSeconds > 0, !Task.isCancelled { _ = await reconciler.reconcile() }
        }
    }
}
