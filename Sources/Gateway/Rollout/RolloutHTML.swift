import IAPCore
import Ledger

extension MigrationReportHTML {
    /// The dashboard's rollout section: the step and percentage, what the guard says now, the
    /// verdict of each step run, and the timeline of advances and rollbacks with their reasons.
    static func rolloutSection(_ s: RolloutController.Status, now: Int64) -> String {
        let steps = s.plan.steps.map { "\($0.percent) %" }.joined(separator: " → ")
        var html = "<section id=\"rollout\"><h2>Rollout of receipts to \(escape(s.plan.to.rawValue))</h2>\n"
        html += "<div class=\"verdict \(s.guardHolds ? "ready" : "not-ready")\">"
            + "<strong id=\"rollout-percent\">\(s.state.percent) %</strong> of accounts answered by \(escape(s.plan.to.rawValue))"
            + (s.state.paused ? " (paused)" : "") + "; guard \(s.guardHolds ? "holds" : "trips")</div>\n"
        html += "<p>Plan: \(escape(steps))\(s.plan.autoAdvance ? ", advancing itself" : ", advanced by hand")"
            + "; the current step since \(date(s.state.stepStartedAt)).</p>\n"
        if !s.guardFindings.isEmpty {
            html += "<ul class=\"criteria\">" + s.guardFindings.map { "<li class=\"\(s.guardHolds ? "met" : "unmet")\">\(escape($0))</li>" }.joined()
                + "</ul>\n"
        }
        html += "<table id=\"rollout-steps\"><tr><th>Step</th><th>From</th><th>To</th><th>Verdict</th><th>Why</th></tr>\n"
        for v in RolloutTimeline.steps(s, now: now) {
            html += "<tr><td>\(v.percent) %</td><td>\(date(v.from))</td><td>\(v.to.map(date) ?? "now")</td>"
                + "<td>\(v.verdict.rawValue)</td><td>\(escape(v.reason))</td></tr>\n"
        }
        html += "</table>\n<table id=\"rollout-timeline\"><tr><th>When</th><th>Change</th><th>By</th><th>Why</th><th>Purchases</th></tr>\n"
        for e in s.events {
            html += "<tr><td>\(date(e.at))</td><td>\(e.action.rawValue): \(e.fromPercent) % → \(e.toPercent) %</td>"
                + "<td>\(e.actor.rawValue)</td><td>\(escape(e.reason))</td>"
                + "<td class=\"id\">\(e.purchases.map(escape).joined(separator: " "))</td></tr>\n"
        }
        if s.events.isEmpty { html += "<tr><td colspan=\"5\" class=\"none\">No change yet: 0 % of accounts.</td></tr>\n" }
        return html + "</table></section>\n"
    }
}
