import Foundation
import IAPConfig
import IAPCore
import Ledger

/// Drains the notification inbox through the subscription state machine. Each entry is applied
/// and marked processed in one database transaction (the ledger's `processPending`), so a crash at
/// any point neither loses nor repeats an effect; restarting simply drains again.
public final class NotificationProcessor: Sendable {
    let apps: [String: AppPolicy]
    let ledger: any NotificationLedger
    let logger: Logger
    let now: @Sendable () -> Int64

    public init(apps: [String: AppPolicy], ledger: any NotificationLedger, logger: Logger,
                now: @escaping @Sendable () -> Int64) {
        self.apps = apps
        self.ledger = ledger
        self.logger = logger
        self.now = now
    }

    /// Applies what is due now; returns what happened.
    @discardableResult
    public func drain(limit: Int = 200) async throws(VerificationError) -> ProcessReport {
        let now = now()
        let apps = apps
        let report = try await ledger.processPending(limit: limit, now: now) { (entry, state) throws(VerificationError) in
            // An entry of an app no longer configured changes no state.
            _ = try apps.app(entry.bundleId)
            // An entry that names no chain (TEST, RESCIND_CONSENT with appData, a type Apple adds
            // tomorrow) still goes through the state machine, chainless: it changes no state, but
            // its notice — or `unknownNotification` — reaches the webhook as an event of its own.
            let event = entry.event ?? Self.chainlessEvent(entry)
            return SubscriptionLifecycle.apply(event, to: state, now: now)
        }
        if report.processed + report.failed + report.parked > 0 {
            logger.info("notifications_processed", ["processed": String(report.processed), "failed": String(report.failed),
                                                    "unknown": String(report.unknown), "parked": String(report.parked)])
        }
        return report
    }

    static func chainlessEvent(_ entry: InboxEntry) -> LifecycleEvent {
        LifecycleEvent(id: entry.id, bundleId: entry.bundleId, notificationType: NotificationType(rawValue: entry.notificationType),
                       subtype: entry.subtype.map(NotificationSubtype.init(rawValue:)), signedDate: entry.signedDate,
                       environment: AppStoreEnvironment(rawValue: entry.environment), transaction: nil, renewal: nil)
    }

    /// Drains until cancelled, at least every `interval`.
    public func run(interval: Duration = .milliseconds(200)) async {
        await repeatUntilCancelled(every: interval, logger: logger,
                                   failure: "notification_processing_failed") { () throws(VerificationError) in
            while try await drain().processed > 0 {}
        }
    }
}
