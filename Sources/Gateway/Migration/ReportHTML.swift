import IAPCore

/// Renders a `MigrationReport` as one self-contained HTML page (the batch command's report.html
/// and the gateway's `GET /dashboard`). Charts are inline SVG drawn here; no script, no font, no
/// style sheet or image is loaded from anywhere, and the page's own Content-Security-Policy
/// forbids it, so a value that slipped past escaping still could not run or phone home. Every
/// value that came from Apple or the ledger goes through `escape`.
public enum MigrationReportHTML {
    public static let contentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

    /// `rollout`: the app's receipt rollout, shown first when the app is in one.
    public static func render(_ report: MigrationReport, rollout: RolloutController.Status? = nil, now: Int64 = 0) -> String {
        var html = """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8">
        <meta http-equiv="Content-Security-Policy" content="\(contentSecurityPolicy)">
        <meta name="referrer" content="no-referrer">
        <title>Migration report: \(escape(report.bundleId))</title>
        <style>\(style)</style></head><body>
        <h1>Migration report: <span class="app">\(escape(report.bundleId))</span></h1>

        """
        if let rollout { html += rolloutSection(rollout, now: now) }
        html += verdictSection(report)
        html += impactSection(report)
        html += failuresSection(report)
        html += "<section><h2>Agreement of comparisons per day</h2>\n\(perDayChart(report))</section>\n"
        html += "<div class=\"charts\"><section><h2>Findings by class (one per cause)</h2>\n"
        html += barChart(id: "by-class", report.differencesByClass.map { ($0.kind.rawValue, $0.count) })
        html += "</section><section><h2>Findings by field</h2>\n"
        html += report.differencesByField.isEmpty ? "<p class=\"none\">No field disagreed.</p>"
            : barChart(id: "by-field", report.differencesByField.map { ($0.field, $0.count) })
        html += "</section></div>\n"
        html += breakdownTable(report)
        html += perFieldTable(report)
        html += sideBySideTable(report)
        html += "</body></html>\n"
        return html
    }

    /// HTML-escapes text for element content and double-quoted attributes alike.
    public static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            // Controls would only confuse the reader (and some are invalid in HTML).
            case _ where scalar.value < 0x20 && scalar != "\n" && scalar != "\t": out += "\u{FFFD}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static let style = """
    body{font-family:sans-serif;margin:24px;color:#1d1d1f;background:#fff}h1{font-size:22px}h2{font-size:16px;margin:18px 0 8px}
    .app{font-family:monospace}.verdict{padding:12px 16px;border-radius:8px;font-size:18px;margin:12px 0}
    .ready{background:#e3f6e8;border:1px solid #2e9e4f}.not-ready{background:#fdecea;border:1px solid #c9372c}
    .stats{display:flex;gap:24px;margin:8px 0}.stats div{background:#f4f4f6;padding:8px 12px;border-radius:6px}
    .charts{display:flex;gap:32px;flex-wrap:wrap}table{border-collapse:collapse;margin:8px 0;font-size:13px}
    th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f4f4f6}
    td.value{font-family:monospace;max-width:420px;overflow-wrap:anywhere}.ms{color:#666;font-size:11px}
    table.record{margin:0;font-size:12px}table.record th{font-weight:normal;text-align:right}td.legacy{background:#fff5e6}td.new{background:#eaf2ff}
    .none{color:#666}svg text{font-family:sans-serif;font-size:12px}.id,.code{font-family:monospace;white-space:nowrap}time{white-space:nowrap}
    li.met{color:#2e6b3a}li.unmet{color:#a12a20;font-weight:bold}ul.criteria{margin:0;padding-left:16px}#verdict-reasons{font-size:14px;margin:6px 0 0}
    """

    private static func verdictSection(_ r: MigrationReport) -> String {
        var s = "<div id=\"verdict\" class=\"verdict \(r.verdict.isReady ? "ready" : "not-ready")\"><strong>"
            + "\(r.verdict.label)</strong> (\(escape(r.criteria.primaryEnvironment)))"
        if case .notReady(let reasons) = r.verdict {
            s += "<ul id=\"verdict-reasons\">" + reasons.map { "<li>\(escape($0))</li>" }.joined() + "</ul>"
        }
        s += "</div>\n"
        s += "<div class=\"stats\"><div>Comparisons: <strong>\(r.overall.total)</strong></div>"
            + "<div>Agreed: <strong>\(r.overall.agreed)</strong> (\(MigrationReport.percent(r.overall.rate)))</div>"
            + "<div>With disagreements: <strong>\(r.disagreements)</strong></div>"
            + "<div>Path failures: <strong>\(r.pathFailures)</strong></div>"
            + "<div id=\"refused-by-both\">Refused by both (junk, not counted): <strong>\(r.refusedByBoth)</strong>"
            + r.refusedByBothByCodes.map { " <span class=\"code\">\(escape($0.codes))</span> \($0.count)" }.joined()
            + "</div></div>\n"
        s += "<table id=\"readiness\"><tr><th>Environment</th><th>Purchase chains</th><th>Agreed</th><th>Accounts</th><th>Criteria</th></tr>\n"
        for e in r.environments {
            let role = e.environment == r.criteria.primaryEnvironment ? " (decides)" : " (judged apart)"
            s += "<tr><td>\(escape(e.environment))\(role)<br><strong>\(e.isReady ? "ready" : "not ready")</strong></td>"
                + "<td>\(e.chains)</td><td>\(e.agreedChains)</td><td>\(e.accounts)</td><td><ul class=\"criteria\">"
                + e.criteria.map { "<li class=\"\($0.met ? "met" : "unmet")\">\($0.met ? "✓" : "✗") \(escape($0.text))</li>" }.joined()
                + "</ul></td></tr>\n"
        }
        s += "</table>\n"
        if r.truncated { s += "<p class=\"none\">Only the most recent comparisons are included.</p>\n" }
        return s
    }

    /// "If you cut over now": per product the counts, then every account whose access would change.
    private static func impactSection(_ r: MigrationReport) -> String {
        var s = "<section id=\"impact\"><h2>If you cut over now</h2>\n"
        guard !r.impact.isEmpty else {
            return s + "<p class=\"none\">No account would lose or gain access, and no expiry would change (latest comparison of each purchase chain).</p></section>\n"
        }
        var counts: [String: [MigrationReport.ImpactRow.Change: Int]] = [:]
        for row in r.impact { counts[row.productId, default: [:]][row.change, default: 0] += 1 }
        s += "<table id=\"impact-by-product\"><tr><th>Product</th><th>Would lose access</th><th>Would gain access</th><th>Different expiry</th></tr>\n"
        for product in counts.keys.sorted() {
            let c = counts[product]!
            s += "<tr><td class=\"id\">\(escape(product))</td><td>\(c[.losesAccess] ?? 0)</td><td>\(c[.gainsAccess] ?? 0)</td><td>\(c[.differentExpiry] ?? 0)</td></tr>\n"
        }
        s += "</table>\n<table id=\"impact-accounts\"><tr><th>Change</th><th>Account</th><th>Product</th><th>Purchase chain</th>"
            + "<th>Legacy (verifyReceipt)</th><th>New (Server API)</th><th>Environment</th></tr>\n"
        for row in r.impact {
            s += "<tr><td>\(label(row.change))</td><td class=\"id\">\(escape(row.account ?? "(unknown)"))</td>"
                + "<td class=\"id\">\(escape(row.productId))</td><td class=\"id\">\(escape(row.originalTransactionId))</td>"
                + "<td class=\"legacy\">\(state(row.legacyStateName, row.legacyExpiresDate))</td>"
                + "<td class=\"new\">\(state(row.serverAPIStateName, row.serverAPIExpiresDate))</td><td>\(escape(row.environment))</td></tr>\n"
        }
        return s + "</table></section>\n"
    }

    static func label(_ change: MigrationReport.ImpactRow.Change) -> String {
        switch change {
        case .losesAccess: "would lose access"
        case .gainsAccess: "would gain access"
        case .differentExpiry: "different expiry"
        }
    }

    private static func state(_ name: String, _ expires: Int64?) -> String {
        guard name != MigrationReport.ImpactRow.notFound else { return "<em class=\"none\">\(name)</em>" }
        return escape(name) + (expires.map { " until " + date($0) } ?? "")
    }

    /// A UTC ISO-8601 date, the milliseconds in a tooltip.
    static func date(_ millis: Int64) -> String {
        "<time title=\"\(millis)\">\(MigrationReport.isoDate(millis))</time>"
    }

    private static func failuresSection(_ r: MigrationReport) -> String {
        var s = "<section id=\"failures\"><h2>Path failures by class</h2>\n"
        guard !r.failures.isEmpty || r.unattributedFailures > 0 else { return s + "<p class=\"none\">No path failed.</p></section>\n" }
        if r.unattributedFailures > 0 {
            s += "<p>\(r.unattributedFailures) failed comparison(s) name no purchase chain (both paths failed): they block every environment.</p>\n"
        }
        s += "<table id=\"failure-classes\"><tr><th>Code</th><th>Path</th><th>Product</th><th>Comparisons</th><th>First seen</th>"
            + "<th>Last seen</th><th>Sample</th><th>Explained by policy</th></tr>\n"
        for f in r.failures {
            s += "<tr><td class=\"code\">\(escape(f.code))</td><td>\(escape(f.path))</td><td class=\"id\">\(escape(f.productId ?? ""))</td>"
                + "<td>\(f.count)</td><td>\(date(f.firstSeen))</td><td>\(date(f.lastSeen))</td>"
                + "<td>transaction <span class=\"id\">\(escape(f.sampleTransactionId ?? "-"))</span>, account <span class=\"id\">"
                + "\(escape(f.sampleAccount ?? "-"))</span>, comparison <span class=\"id\">\(escape(f.sampleComparisonId))</span></td>"
                + "<td>\(f.explanation.map(escape) ?? "<strong>no: blocks the cutover</strong>")</td></tr>\n"
        }
        return s + "</table></section>\n"
    }

    /// Horizontal bars, one per label, scaled to the largest count.
    static func barChart(id: String, _ bars: [(label: String, count: Int)]) -> String {
        let rowHeight = 24, labelWidth = 190, barWidth = 300, width = labelWidth + barWidth + 60
        let height = max(bars.count, 1) * rowHeight + 8
        let top = max(bars.map(\.count).max() ?? 0, 1)
        var s = "<svg id=\"\(id)\" width=\"\(width)\" height=\"\(height)\" role=\"img\">\n"
        for (i, bar) in bars.enumerated() {
            let y = i * rowHeight + 4
            let w = bar.count == 0 ? 0 : max(2, bar.count * barWidth / top)
            let label = escape(String(bar.label.prefix(28)))
            s += "<text x=\"\(labelWidth - 6)\" y=\"\(y + 15)\" text-anchor=\"end\">\(label)</text>"
            s += "<rect x=\"\(labelWidth)\" y=\"\(y + 2)\" width=\"\(w)\" height=\"\(rowHeight - 6)\" fill=\"#c9372c\"><title>\(escape(bar.label)): \(bar.count)</title></rect>"
            s += "<text x=\"\(labelWidth + w + 6)\" y=\"\(y + 15)\">\(bar.count)</text>\n"
        }
        return s + "</svg>\n"
    }

    /// One column per day: its height is the agreement rate, labelled with rate and count.
    static func perDayChart(_ r: MigrationReport) -> String {
        guard !r.perDay.isEmpty else { return "<p class=\"none\">No comparisons yet.</p>\n" }
        let column = 56, plotHeight = 160, left = 44, top = 20, bottom = 44
        let width = left + r.perDay.count * column + 20, height = top + plotHeight + bottom
        let thresholdY = top + Int(Double(plotHeight) * (1 - r.criteria.thresholds.agreementThreshold))
        var s = "<svg id=\"per-day\" width=\"\(width)\" height=\"\(height)\" role=\"img\">\n"
        s += "<line x1=\"\(left)\" y1=\"\(top + plotHeight)\" x2=\"\(width - 10)\" y2=\"\(top + plotHeight)\" stroke=\"#888\"/>"
        s += "<text x=\"\(left - 6)\" y=\"\(top + 4)\" text-anchor=\"end\">100%</text>"
        s += "<text x=\"\(left - 6)\" y=\"\(top + plotHeight)\" text-anchor=\"end\">0%</text>\n"
        for (i, day) in r.perDay.enumerated() {
            let x = left + i * column + 8
            let h = Int((Double(plotHeight) * day.rate.rate).rounded())
            let colour = day.rate.rate >= r.criteria.thresholds.agreementThreshold ? "#2e9e4f" : "#e08a1e"
            s += "<rect x=\"\(x)\" y=\"\(top + plotHeight - h)\" width=\"\(column - 16)\" height=\"\(h)\" fill=\"\(colour)\">"
                + "<title>\(day.day): \(day.rate.agreed)/\(day.rate.total)</title></rect>"
            s += "<text x=\"\(x + (column - 16) / 2)\" y=\"\(top + plotHeight - h - 4)\" text-anchor=\"middle\">\(MigrationReport.percent(day.rate.rate))</text>"
            s += "<text x=\"\(x + (column - 16) / 2)\" y=\"\(top + plotHeight + 16)\" text-anchor=\"middle\">\(day.day.suffix(5))</text>"
            s += "<text x=\"\(x + (column - 16) / 2)\" y=\"\(top + plotHeight + 32)\" text-anchor=\"middle\">n=\(day.rate.total)</text>\n"
        }
        s += "<line x1=\"\(left)\" y1=\"\(thresholdY)\" x2=\"\(width - 10)\" y2=\"\(thresholdY)\" stroke=\"#c9372c\" stroke-dasharray=\"4 3\"/>"
        return s + "\n</svg>\n"
    }

    private static func breakdownTable(_ r: MigrationReport) -> String {
        guard !r.breakdowns.isEmpty else { return "" }
        var s = "<section><h2>Comparisons per product, environment and app version</h2><table id=\"breakdowns\">"
            + "<tr><th>By</th><th>Value</th><th>Comparisons</th><th>Agreed</th><th>With findings</th><th>Path failures</th></tr>\n"
        for b in r.breakdowns {
            s += "<tr><td>\(escape(b.dimension))</td><td class=\"id\">\(escape(b.value))</td><td>\(b.comparisons)</td>"
                + "<td>\(b.agreed)</td><td>\(b.withFindings)</td><td>\(b.failed)</td></tr>\n"
        }
        return s + "</table></section>\n"
    }

    private static func perFieldTable(_ r: MigrationReport) -> String {
        guard !r.perField.isEmpty else { return "" }
        var s = "<section><h2>Agreement per field</h2><table id=\"per-field\"><tr><th>Field</th><th>Transactions agreed</th><th>Rate</th></tr>\n"
        for f in r.perField {
            s += "<tr><td>\(escape(f.field))</td><td>\(f.rate.agreed) / \(f.rate.total)</td><td>\(MigrationReport.percent(f.rate.rate))</td></tr>\n"
        }
        return s + "</table></section>\n"
    }

    private static func sideBySideTable(_ r: MigrationReport) -> String {
        var s = "<section><h2>Disagreeing purchases, side by side</h2>\n"
        guard !r.rows.isEmpty else { return s + "<p class=\"none\">No disagreements.</p></section>\n" }
        s += "<table id=\"side-by-side\"><tr><th>Transaction</th><th>Product</th><th>Class</th><th>Field</th>"
            + "<th>Legacy (verifyReceipt)</th><th>New (Server API)</th></tr>\n"
        for row in r.rows {
            s += "<tr><td class=\"id\">\(escape(row.transactionId))</td><td class=\"id\">\(escape(row.productId ?? ""))</td>"
                + "<td>\(escape(row.kind.rawValue))</td><td>\(escape(row.field ?? MigrationReport.wholeTransaction))"
                + (row.related.isEmpty ? "" : "<br><span class=\"none\">related: "
                    + escape(row.related.compactMap(\.field).sorted().joined(separator: ", ")) + "</span>") + "</td>"
                + "<td class=\"value legacy\">\(value(row.legacyValue, other: row.serverAPIValue, field: row.field))</td>"
                + "<td class=\"value new\">\(value(row.serverAPIValue, other: row.legacyValue, field: row.field))</td></tr>\n"
        }
        return s + "</table></section>\n"
    }

    /// A canonical value for people: dates as UTC ISO-8601 (the milliseconds beside them when the
    /// other side differs), a record found on one side only as a field table, anything else as its JSON text.
    static func value(_ v: String?, other: String?, field: String?) -> String {
        guard let v else { return "<em class=\"none\">absent</em>" }
        if let field, isDate(field), let millis = Int64(v) {
            return date(millis) + (other != v ? " <span class=\"ms\">\(millis)</span>" : "")
        }
        if field == nil, let record = try? StrictJSON().parse(Array(v.utf8)).objectValue {
            return "<table class=\"record\">" + record.keys.sorted().map { key in
                let text = record[key]!.jsonText
                let shown = isDate(key) ? Int64(text).map(date) ?? escape(text) : escape(text)
                return "<tr><th>\(escape(key))</th><td class=\"id\">\(shown)</td></tr>"
            }.joined() + "</table>"
        }
        return escape(v)
    }

    /// Canonical date fields are integer milliseconds whose names end in "Date" (expiresDate, renewal.renewalDate, ...).
    static func isDate(_ field: String) -> Bool { field.hasSuffix("Date") }
}
