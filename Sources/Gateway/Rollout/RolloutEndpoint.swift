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
        .object([
            "bundleId": .string(s.bundleId),
            "from": .string(s.plan.from.rawValue),
            "to": .string(s.plan.to.rawValue),
            "percent": .int(Int64(s.state.percent)),
            "step": .int(Int64(s.state.step + 1)),
            "steps": .array(s.plan.steps.map { step in
                .object(["percent": .int(Int64(step.percent)), "minimumDwellSeconds": .int(step.minimumDwellSeconds),
                         "minimumComparedChains": .int(Int64(step.minimumComparedChains))])
            }),
            "stepStartedAt": .int(s.state.stepStartedAt),
            "paused": .bool(s.state.paused),
            "autoAdvance": .bool(s.plan.autoAdvance),
            "guardIntervalSeconds": .int(s.plan.guardIntervalSeconds),
            "guard": .object(["holds": .bool(s.guardHolds), "findings": .array(s.guardFindings.map(JSONValue.string)),
                              "purchases": .array(s.guardPurchases.map(JSONValue.string))]),
            "events": .array(s.events.map(event)),
            "stepVerdicts": .array(RolloutTimeline.steps(s, now: now).map { v in
                var o: [String: JSONValue] = ["percent": .int(Int64(v.percent)), "from": .int(v.from), "verdict": .string(v.verdict.rawValue),
                                              "reason": .string(v.reason)]
                if let to = v.to { o["to"] = .int(to) }
                return .object(o)
            }),
        ])
    }

    static func event(_ e: RolloutEvent) -> JSONValue {
        .object(["at": .int(e.at), "action": .string(e.action.rawValue), "actor": .string(e.actor.rawValue),
                 "fromPercent": .int(Int64(e.fromPercent)), "toPercent": .int(Int64(e.toPercent)), "reason": .string(e.reason),
                 "purchases": .array(e.purchases.map(JSONValue.string))])
    }
}

/// The steps a rollout ran, read from its events: each step's time at its percentage and how it
/// ended (the guard held and it advanced, or it was rolled back and why), the current one last.
enum RolloutTimeline {
    struct StepVerdict: Equatable, Sendable {
        enum Verdict: String, Sendable { case held, rolledBack, running, tripping }
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
