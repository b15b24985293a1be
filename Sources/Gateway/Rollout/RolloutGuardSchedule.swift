import IAPConfig
import IAPCore
import Ledger

/// The guard of every app in a rollout, each at its plan's interval (at most a minute), on every
/// instance: a change is made once whichever instance judges first (`RolloutController`).
struct RolloutGuardSchedule: Sendable {
    let apps: [AppPolicy]
    let controller: RolloutController
    let logger: Logger
    /// How often the schedule looks whether an app's guard is due.
    static let tick: Duration = .seconds(1)

    init(apps: [String: AppPolicy], controller: RolloutController, logger: Logger) {
        self.apps = apps.values.filter { $0.routing.rollout != nil }.sorted { $0.bundleId < $1.bundleId }
        self.controller = controller
        self.logger = logger
    }

    func run() async {
        guard !apps.isEmpty else { return }
        var lastRun: [String: ContinuousClock.Instant] = [:]
        await repeatUntilCancelled(every: Self.tick, logger: logger, failure: "rollout_guard_failed") { () throws(VerificationError) in
            let now = ContinuousClock.now
            for app in apps {
                let interval = Duration.seconds(app.routing.rollout?.guardIntervalSeconds ?? 60)
                if let last = lastRun[app.bundleId], now - last < interval { continue }
                lastRun[app.bundleId] = now
                do throws(VerificationError) {
                    try await controller.guardPass(app)
                } catch {
                    // Another instance changed the step first: the next pass judges the new one.
                    guard error.code == .rolloutConflict else { throw error }
                }
            }
        }
    }
}
