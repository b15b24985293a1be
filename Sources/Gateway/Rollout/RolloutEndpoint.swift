import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// GET /v1/apps/{bundleId}/rollout: where the app's receipt rollout stands (the step, its
/// percentage, whether it is paused), what its guard says of the step now, the plan, the timeline
/// of advances and rollbacks with their reasons, and the verdict of each step it ran.
enum RolloutEndpoint {
    static func answer(_ app: AppPolicy, controller: RolloutController?) async throws(VerificationError) -> HTTPResponse {
        guard let controller else { throw VerificationError(.notFound, "rollouts are not enabled") }
        return .json(200, json(try await controller.status(app), now: controller.now()).jsonText)
    }

    static func json(_ s: RolloutController.Status, now: Int64) -> JSONValue {
        answer.encode(Answer(status: s, steps: RolloutTimeline.steps(s, now: now)))
    }

    /// The status with each step's verdict as of the answer's time.
    struct Answer: Sendable {
        let status: RolloutController.Status
        let steps: [RolloutTimeline.StepVerdict]
    }

    static let event = JSONShape<RolloutEvent>.object([
        .required("at", .integer) { $0.at },
        .required("action", .cases) { $0.action },
        .required("actor", .cases) { $0.actor },
        .required("fromPercent", .count) { $0.fromPercent },
        .required("toPercent", .count) { $0.toPercent },
        .required("reason", .string) { $0.reason },
        .required("purchases", .array(.string)) { $0.purchases },
    ])

    static let answer = JSONShape<Answer>.object([
        .required("bundleId", .string) { $0.status.bundleId },
        .required("from", .string) { $0.status.plan.from.rawValue },
        .required("to", .string) { $0.status.plan.to.rawValue },
        .required("percent", .count) { $0.status.state.percent },
        .required("step", JSONShape<Int>.count.described("the current step's place in the plan, 1 first; 0 before the first")) {
            $0.status.state.step + 1
        },
        .required("steps", .array(.object([
            .required("percent", .count) { $0.percent },
            .required("minimumDwellSeconds", .integer) { $0.minimumDwellSeconds },
            .required("minimumComparedChains", .count) { $0.minimumComparedChains },
        ]))) { $0.status.plan.steps },
        .required("stepStartedAt", .integer) { $0.status.state.stepStartedAt },
        .required("paused", .boolean) { $0.status.state.paused },
        .required("autoAdvance", .boolean) { $0.status.plan.autoAdvance },
        .required("guardIntervalSeconds", .integer) { $0.status.plan.guardIntervalSeconds },
        .required("guard", .object([
            .required("holds", .boolean) { $0.guardHolds },
            .required("findings", .array(.string)) { $0.guardFindings },
            .required("purchases", .array(.string)) { $0.guardPurchases },
        ])) { $0.status },
        .required("events", .array(event)) { $0.status.events },
        .required("stepVerdicts", .array(.object([
            .required("percent", .count) { $0.percent },
            .required("from", .integer) { $0.from },
            .optional("to", .integer) { $0.to },
            .required("verdict", .cases) { $0.verdict },
            .required("reason", .string) { $0.reason },
        ]))) { $0.steps },
    ]).named("Rollout")
}

extension RolloutEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route("GET", "/v1/apps/{bundleId}/rollout", name: "rollout", answer: answer,
              summary: "The app's receipt rollout: its step and percentage, whether it is paused, what its guard says of the step now, the plan, the timeline of advances and rollbacks with their reasons, and each step's verdict",
              refusals: ["404": .error("its receipts are not routed by a rollout (ROLLOUT_NOT_CONFIGURED)")],
              handler: .app(Route.pathApp) { endpoints, _, app, _ throws(VerificationError) in
                  try await RolloutEndpoint.answer(app, controller: endpoints.rollouts)
              }),
    ]
}

/// The steps a rollout ran, read from its events: each step's time at its percentage and how it
/// ended (the guard held and it advanced, or it was rolled back and why), the current one last.
enum RolloutTimeline {
    struct StepVerdict: Equatable, Sendable {
        enum Verdict: String, Sendable, CaseIterable { case held, rolledBack, running, tripping }
        var percent: Int
        var from: Int64
        var to: Int64?
        var verdict: Verdict
        var reason: String
    }

    static func steps(_ s: RolloutController.Status, now: Int64) -> [StepVerdict] {
        var out: [StepVerdict] = []
        var since: Int64?
        for e in s.events.reversed() where e.action == .advanced || e.action == .rolledBack {
            if let since, e.fromPercent > 0 {
                out.append(StepVerdict(percent: e.fromPercent, from: since, to: e.at,
                                       verdict: e.action == .advanced ? .held : .rolledBack, reason: e.reason))
            }
            since = e.at
        }
        if s.state.percent > 0 {
            out.append(StepVerdict(percent: s.state.percent, from: since ?? s.state.stepStartedAt, to: nil,
                                   verdict: s.guardHolds ? .running : .tripping, reason: s.guardFindings.joined(separator: "; ")))
        }
        return out
    }
}
