import IAPConfig
import IAPCore
import Ledger

/// The one judge of a rollout step: over the comparisons made since the step began, whether the
/// path migrated to may keep answering its cohort, and whether the step may advance.
///
/// It trips (the step is rolled back) on any of:
/// - a cohort account whose purchase chain the path migrated to would not grant while the one
///   migrated from does (it lost access, since that path answers it);
/// - purchase chains disagreeing above the plan's threshold (`1 − agreementThreshold`), each chain
///   counted once by its latest comparison;
/// - comparisons in which the path migrated to failed above the plan's failure rate (codes the
///   app's readiness explains are not failures; evidence both paths refused as junk is not counted).
/// A step may advance once it ran its dwell time, compared its number of purchase chains, and holds.
struct RolloutGuard: Sendable {
    enum Judgment: Equatable, Sendable {
        /// The guard holds; `advanceBlockedBy` says what still keeps the step from advancing (empty: nothing).
        case holds(chains: Int, advanceBlockedBy: [String])
        case trips(reason: String, purchases: [String])
    }

    let plan: AppPolicy.Rollout
    let app: AppPolicy

    /// `comparisons`: the app's, made since `state.stepStartedAt`.
    func judge(_ state: RolloutState, comparisons: [PurchaseComparison], now: Int64) -> Judgment {
        let report = MigrationReport(bundleId: app.bundleId, comparisons: comparisons, criteria: ReadinessCriteria(app: app))
        let losses = report.impact.filter { row in
            row.change == .losesAccess && row.account.map {
                RolloutCohort.contains(percent: state.percent, bundleId: app.bundleId, account: $0)
            } == true
        }
        if !losses.isEmpty {
            return .trips(reason: "\(losses.count) cohort account(s) would lose access: the \(plan.to) path does not grant "
                              + "what the \(plan.from) path grants", purchases: losses.map(\.originalTransactionId))
        }
        let chains = report.environments.reduce(0) { $0 + $1.chains }
        let disagreeing = report.environments.reduce(0) { $0 + $1.disagreeingChains }
        let allowedDisagreement = 1 - plan.agreement(app.readiness)
        if chains > 0, Double(disagreeing) / Double(chains) > allowedDisagreement + 1e-12 {
            let purchases = Set(report.comparisons.filter { !$0.differences.isEmpty }
                .flatMap { $0.purchases.filter { !$0.agreed }.map(\.originalTransactionId) })
            return .trips(reason: "\(disagreeing) of \(chains) purchase chain(s) disagree (at most \(Self.percent(allowedDisagreement)) may)",
                          purchases: Array(purchases))
        }
        let explained = app.readiness.explainedFailures
        let failed = report.comparisons.filter { c in c.serverAPIError.map { explained[$0] == nil } == true }
        let allowedFailures = plan.failureRate(app.readiness)
        if !report.comparisons.isEmpty, Double(failed.count) / Double(report.comparisons.count) > allowedFailures + 1e-12 {
            let codes = Set(failed.compactMap(\.serverAPIError)).sorted().joined(separator: ", ")
            return .trips(reason: "the \(plan.to) path failed \(failed.count) of \(report.comparisons.count) comparison(s) "
                              + "(\(codes); at most \(Self.percent(allowedFailures)) may)",
                          purchases: failed.flatMap { $0.purchases.map(\.originalTransactionId) })
        }
        return .holds(chains: chains, advanceBlockedBy: blockers(state, chains: chains, now: now))
    }

    /// What keeps a holding step from advancing: its dwell, its comparisons, or being the last.
    private func blockers(_ state: RolloutState, chains: Int, now: Int64) -> [String] {
        guard let next = RolloutSteps(plan).next(after: state.percent) else { return ["the last step (100 %) is reached"] }
        // Leaving 0 % asks for the first step's comparisons (of the shadow before it), no dwell.
        let current = RolloutSteps(plan).current(state.percent)
        let needed = current?.minimumComparedChains ?? next.minimumComparedChains
        var blockers: [String] = []
        if let current, now - state.stepStartedAt < current.minimumDwellSeconds * 1000 {
            blockers.append("dwell: \((now - state.stepStartedAt) / 1000) s of \(current.minimumDwellSeconds) s")
        }
        if chains < needed { blockers.append("compared purchase chains: \(chains) of \(needed)") }
        return blockers
    }

    static func percent(_ share: Double) -> String {
        let value = (share * 1000).rounded() / 10
        return (value == value.rounded() ? String(Int(value)) : String(value)) + " %"
    }
}

/// Where a percentage stands among a plan's steps: a plan edited while its rollout runs keeps the
/// stored percentage, and moves from it to the plan's neighbouring steps.
struct RolloutSteps {
    let steps: [AppPolicy.Rollout.Step]
    init(_ plan: AppPolicy.Rollout) { steps = plan.steps }

    /// The step at this percentage, if the plan has it.
    func current(_ percent: Int) -> AppPolicy.Rollout.Step? { steps.first { $0.percent == percent } }
    /// The first step above `percent`; nil at the top.
    func next(after percent: Int) -> AppPolicy.Rollout.Step? { steps.first { $0.percent > percent } }
    /// The last step below `percent`, or 0 % (nil).
    func previous(before percent: Int) -> AppPolicy.Rollout.Step? { steps.last { $0.percent < percent } }
    /// The index of a step's percentage (-1: 0 %).
    func index(_ percent: Int) -> Int { steps.firstIndex { $0.percent == percent } ?? -1 }
}
