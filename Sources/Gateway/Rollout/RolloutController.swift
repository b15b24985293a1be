import IAPConfig
import IAPCore
import Ledger

/// The one place a rollout changes: an operator's advance, pause or rollback, and the guard's pass
/// (which rolls back a step that trips, and with `autoAdvance` advances one that is ready). Every
/// change is made against the state it was judged on (`RolloutLedger.changeRollout`), so instances
/// running the guard side by side change a step once.
public struct RolloutController: Sendable {
    public typealias Store = RolloutLedger & ComparisonLedger

    let ledger: any Store
    let logger: Logger
    let now: @Sendable () -> Int64

    public init(ledger: any Store, logger: Logger = .disabled, now: @escaping @Sendable () -> Int64) {
        self.ledger = ledger
        self.logger = logger
        self.now = now
    }

    /// Where one app's rollout stands, and what its guard says of the current step now.
    public struct Status: Sendable {
        public var bundleId: String
        public var plan: AppPolicy.Rollout
        public var state: RolloutState
        public var guardHolds: Bool
        /// Why the guard trips, or what keeps the step from advancing (empty: ready to advance).
        public var guardFindings: [String]
        /// The purchases a tripping guard names.
        public var guardPurchases: [String]
        /// Newest first.
        public var events: [RolloutEvent]
    }

    static func plan(_ app: AppPolicy) throws(VerificationError) -> AppPolicy.Rollout {
        guard let plan = app.routing.rollout else {
            throw VerificationError(.rolloutNotConfigured, "\(app.bundleId): receipts are not routed by a rollout")
        }
        return plan
    }

    public func status(_ app: AppPolicy, events limit: Int = 50) async throws(VerificationError) -> Status {
        let plan = try Self.plan(app)
        let (state, judgment) = try await judged(app, plan)
        let events = try await ledger.rolloutEvents(bundleId: app.bundleId, limit: limit)
        switch judgment {
        case .holds(_, let blockers):
            return Status(bundleId: app.bundleId, plan: plan, state: state, guardHolds: true, guardFindings: blockers,
                          guardPurchases: [], events: events)
        case .trips(let reason, let purchases):
            return Status(bundleId: app.bundleId, plan: plan, state: state, guardHolds: false, guardFindings: [reason],
                          guardPurchases: purchases.sorted(), events: events)
        }
    }

    /// Moves to the next step by hand (and out of a pause); refused while the current step's guard trips.
    public func advance(_ app: AppPolicy) async throws(VerificationError) -> RolloutState {
        let plan = try Self.plan(app)
        let (state, judgment) = try await judged(app, plan)
        if case .trips(let reason, _) = judgment {
            throw VerificationError(.rolloutConflict, "\(app.bundleId): the guard trips at \(state.percent) %: \(reason)")
        }
        guard let next = RolloutSteps(plan).next(after: state.percent) else {
            throw VerificationError(.rolloutConflict, "\(app.bundleId): the rollout is at its last step (\(state.percent) %)")
        }
        return try await change(state, to: next.percent, plan: plan, paused: false,
                                event: .advanced, actor: .operator, reason: "advanced by an operator").0
    }

    /// Stops automatic advances; which accounts the Server API answers stays as it is.
    public func pause(_ app: AppPolicy) async throws(VerificationError) -> RolloutState {
        let plan = try Self.plan(app)
        let state = try await current(app)
        guard !state.paused else { return state }
        return try await change(state, to: state.percent, plan: plan, paused: true, event: .paused, actor: .operator,
                                reason: "paused by an operator", keepsStart: true).0
    }

    /// Back to the step before (or 0 %), paused.
    public func rollback(_ app: AppPolicy, reason: String = "rolled back by an operator") async throws(VerificationError)
        -> RolloutState {
        let plan = try Self.plan(app)
        let state = try await current(app)
        guard state.percent > 0 else {
            throw VerificationError(.rolloutConflict, "\(app.bundleId): the rollout is at 0 %: nothing to roll back")
        }
        return try await rollBack(state, plan: plan, app: app, actor: .operator, reason: reason, purchases: []).0
    }

    /// One pass of the guard over one app: rolls back a step that trips; advances a ready one when
    /// the plan says `autoAdvance` and the rollout is not paused. The change made, if any.
    @discardableResult
    public func guardPass(_ app: AppPolicy) async throws(VerificationError) -> RolloutEvent? {
        guard let plan = app.routing.rollout else { return nil }
        let (state, judgment) = try await judged(app, plan)
        switch judgment {
        case .trips(let reason, let purchases):
            guard state.percent > 0 else { return nil }
            return try await rollBack(state, plan: plan, app: app, actor: .guard, reason: reason, purchases: purchases).1
        case .holds(_, let blockers):
            guard plan.autoAdvance, !state.paused, blockers.isEmpty,
                  let next = RolloutSteps(plan).next(after: state.percent) else { return nil }
            return try await change(state, to: next.percent, plan: plan, paused: false, event: .advanced, actor: .autoAdvance,
                                    reason: "its dwell and comparisons were met and its guard held").1
        }
    }

    // MARK: Steps

    func current(_ app: AppPolicy) async throws(VerificationError) -> RolloutState {
        try await ledger.rolloutState(bundleId: app.bundleId) ?? .initial(bundleId: app.bundleId)
    }

    private func judged(_ app: AppPolicy, _ plan: AppPolicy.Rollout) async throws(VerificationError)
        -> (RolloutState, RolloutGuard.Judgment) {
        let state = try await current(app)
        let (comparisons, _) = try await DashboardEndpoint.load(app.bundleId, from: state.stepStartedAt, to: nil, ledger: ledger)
        return (state, RolloutGuard(plan: plan, app: app).judge(state, comparisons: comparisons, now: now()))
    }

    private func rollBack(_ state: RolloutState, plan: AppPolicy.Rollout, app: AppPolicy, actor: RolloutEvent.Actor,
                          reason: String, purchases: [String]) async throws(VerificationError) -> (RolloutState, RolloutEvent) {
        let to = RolloutSteps(plan).previous(before: state.percent)?.percent ?? 0
        let at = now()
        let notice = RolloutNotice(fromPercent: state.percent, toPercent: to, reason: reason,
                                   purchases: Array(purchases.sorted().prefix(RolloutEvent.maxPurchases)))
        let webhook = WebhookEvent.rolloutRolledBack(bundleId: app.bundleId, key: "rollout:\(state.revision + 1)", at: at, notice)
        let changed = try await change(state, to: to, plan: plan, paused: true, event: .rolledBack, actor: actor, reason: reason,
                                       purchases: purchases, webhooks: [webhook], at: at)
        logger.warning("rollout_rolled_back", ["bundleId": app.bundleId, "from": String(state.percent), "to": String(to),
                                               "actor": actor.rawValue, "reason": reason,
                                               "purchases": notice.purchases.joined(separator: ",")])
        return changed
    }

    private func change(_ state: RolloutState, to percent: Int, plan: AppPolicy.Rollout, paused: Bool,
                        event action: RolloutEvent.Action, actor: RolloutEvent.Actor, reason: String,
                        purchases: [String] = [], webhooks: [WebhookEvent] = [], keepsStart: Bool = false,
                        at: Int64? = nil) async throws(VerificationError) -> (RolloutState, RolloutEvent) {
        let at = at ?? now()
        var next = state
        next.step = RolloutSteps(plan).index(percent)
        next.percent = percent
        next.paused = paused
        if !keepsStart { next.stepStartedAt = at }
        next.revision = state.revision + 1
        let event = RolloutEvent(at: at, action: action, actor: actor, fromPercent: state.percent, toPercent: percent,
                                 reason: reason, purchases: purchases)
        let stored = state.revision == 0 ? nil : state
        guard try await ledger.changeRollout(expected: stored, next: next, event: event, webhooks: webhooks) else {
            throw VerificationError(.rolloutConflict, "\(state.bundleId): the rollout was changed elsewhere first; read it again")
        }
        if action != .rolledBack {
            logger.info("rollout_changed", ["bundleId": state.bundleId, "action": action.rawValue, "from": String(state.percent),
                                            "to": String(percent), "actor": actor.rawValue])
        }
        return (next, event)
    }
}
