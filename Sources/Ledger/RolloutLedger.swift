import IAPCore

/// Where an app's rollout stands, as every instance reads it: the step of the app's plan (`-1`
/// before the first), the cohort's percentage, and since when. `revision` grows with each change,
/// so a change is made against the state it was judged on (two instances' guards never both act).
public struct RolloutState: Sendable, Equatable, Codable {
    public var bundleId: String
    /// Index into the plan's steps; -1: none yet (0 %).
    public var step: Int
    public var percent: Int
    public var stepStartedAt: Int64
    /// No automatic advance while paused (an operator's pause, or any rollback by the guard).
    public var paused: Bool
    public var revision: Int64

    public init(bundleId: String, step: Int, percent: Int, stepStartedAt: Int64, paused: Bool, revision: Int64) {
        self.bundleId = bundleId
        self.step = step
        self.percent = percent
        self.stepStartedAt = stepStartedAt
        self.paused = paused
        self.revision = revision
    }

    /// An app whose rollout never moved: 0 %, its first step not begun, and "since the step began"
    /// every comparison ever made (the shadow's, before the rollout).
    public static func initial(bundleId: String) -> Self {
        Self(bundleId: bundleId, step: -1, percent: 0, stepStartedAt: 0, paused: false, revision: 0)
    }
}

/// One change of a rollout, kept for the timeline: who made it, why, and the purchases that tripped
/// the guard when it was a rollback.
public struct RolloutEvent: Sendable, Equatable, Codable {
    public enum Action: String, Sendable, Codable, CaseIterable {
        case advanced, rolledBack, paused, resumed
    }
    /// Who changed it: an operator's command, the guard, or the automatic advance.
    public enum Actor: String, Sendable, Codable, CaseIterable {
        case `operator`, `guard`, autoAdvance
    }
    public var at: Int64
    public var action: Action
    public var actor: Actor
    public var fromPercent: Int
    public var toPercent: Int
    public var reason: String
    /// Original transaction ids the reason names (sorted, at most `maxPurchases`).
    public var purchases: [String]

    public static let maxPurchases = 50

    public init(at: Int64, action: Action, actor: Actor, fromPercent: Int, toPercent: Int, reason: String,
                purchases: [String] = []) {
        self.at = at
        self.action = action
        self.actor = actor
        self.fromPercent = fromPercent
        self.toPercent = toPercent
        self.reason = reason
        self.purchases = Array(purchases.sorted().prefix(Self.maxPurchases))
    }
}

/// The rollout state of each app, shared by every instance on one ledger.
public protocol RolloutLedger: Sendable {
    /// The app's state; nil when its rollout never moved (`RolloutState.initial`).
    func rolloutState(bundleId: String) async throws(VerificationError) -> RolloutState?
    /// Replaces `expected` (nil: none stored yet) with `next`, records `event` and queues
    /// `webhooks`, all in one transaction; false, and nothing written, when the stored state is no
    /// longer `expected` (another instance changed it first). `next.revision` is set here.
    func changeRollout(expected: RolloutState?, next: RolloutState, event: RolloutEvent, webhooks: [WebhookEvent])
        async throws(VerificationError) -> Bool
    /// The app's changes, newest first, at most `limit`.
    func rolloutEvents(bundleId: String, limit: Int) async throws(VerificationError) -> [RolloutEvent]
    /// How many times the app's rollout was rolled back, by anyone.
    func rolloutRollbacks(bundleId: String) async throws(VerificationError) -> Int
}
