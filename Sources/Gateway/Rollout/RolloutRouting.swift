import Foundation
import IAPConfig
import IAPCore
import Ledger
import Synchronization

/// Which way one account's receipts go under its app's rollout: the ledger's percentage, read at
/// most once a second per app (so every instance follows a change within a second), and the
/// account's place in the cohort (`RolloutCohort`).
public final class RolloutRouting: Sendable {
    private struct Reading {
        var percent: Int
        var readAt: ContinuousClock.Instant
    }

    private let ledger: any RolloutLedger
    private let logger: Logger
    private let readings = Mutex([String: Reading]())
    /// How old a reading may be before the ledger is asked again.
    static let freshFor: Duration = .seconds(1)

    public init(ledger: any RolloutLedger, logger: Logger = .disabled) {
        self.ledger = ledger
        self.logger = logger
    }

    /// The app as it answers `account`: for an app in a rollout, its receipt routing is the cohort's
    /// when the account is in the cohort, the shadow's otherwise; any other app unchanged.
    func route(_ app: AppPolicy, account: String) async -> AppPolicy {
        guard let plan = app.routing.rollout else { return app }
        let percent = await percent(app.bundleId)
        guard RolloutCohort.contains(percent: percent, bundleId: app.bundleId, account: account) else { return app }
        var routed = app
        routed.routing.receipt = plan.insideCohort
        return routed
    }

    /// The cohort's percentage now. A ledger that cannot be read leaves the last reading in force
    /// (or 0 %: the path migrated from answers, as before the rollout began).
    func percent(_ bundleId: String) async -> Int {
        let now = ContinuousClock.now
        let last = readings.withLock { $0[bundleId] }
        if let last, now - last.readAt < Self.freshFor { return last.percent }
        do {
            let percent = try await ledger.rolloutState(bundleId: bundleId)?.percent ?? 0
            readings.withLock { $0[bundleId] = Reading(percent: percent, readAt: now) }
            return percent
        } catch {
            logger.warning("rollout_state_unreadable", ["bundleId": bundleId, "code": error.code.rawValue])
            return last?.percent ?? 0
        }
    }
}
