import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// GET /dashboard?app=BUNDLE[&from=MS&to=MS][&format=csv] with `Authorization: Bearer <that app's API key>`:
/// the migration report of the app's stored comparisons as one HTML page (or its findings and
/// failures as CSV).
///
/// The key travels in the header only, never in the URL (a `?key=` would land in access logs,
/// browser history and referrers). Each app's key shows that app's data only.
enum DashboardEndpoint {
    static let queryParameters: [QueryParameter] = [.text("app", required: true), .integer("from", 0...Int64.max),
                                                    .integer("to", 0...Int64.max), .oneOf("format", ["html", "csv"])]
    /// Comparisons read into one page at most; beyond it the page says it shows the newest only.
    static let maxComparisons = 20_000

    static func bundleId(_ request: HTTPRequest) throws(VerificationError) -> String {
        // Required: `value(in:)` refuses its absence, so nil never reaches here.
        try queryParameters["app"].value(in: request.query) ?? ""
    }

    static func answer(_ request: HTTPRequest, app: AppPolicy, ledger: any ComparisonLedger, rollouts: RolloutController? = nil)
        async throws(VerificationError) -> HTTPResponse {
        try queryParameters.refuseUnknown(in: request.query)
        let format = try queryParameters["format"].value(in: request.query) ?? "html"
        var window = request.query
        window["app"] = nil
        window["format"] = nil
        let range = try ComparisonsEndpoint.parse(window, bundleId: app.bundleId)
        let report = try await report(app: app, from: range.from, to: range.to, ledger: ledger)
        if format == "csv" {
            return HTTPResponse(status: 200, headers: [
                ("Content-Type", "text/csv; charset=utf-8"),
                ("Content-Disposition", "attachment; filename=\"migration-findings.csv\""),
                ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"),
            ], body: Array(MigrationReportCSV.render(report).utf8))
        }
        let rollout = app.routing.rollout == nil ? nil : try await rollouts?.status(app)
        return HTTPResponse(status: 200, headers: [
            ("Content-Type", "text/html; charset=utf-8"),
            // The header repeats the page's own policy, so even a proxy that strips <meta> cannot loosen it.
            ("Content-Security-Policy", MigrationReportHTML.contentSecurityPolicy),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
        ], body: Array(MigrationReportHTML.render(report, rollout: rollout, now: rollouts?.now() ?? 0).utf8))
    }

    /// The report (verdict, failures, cutover impact) over the app's comparisons in the window.
    static func report(app: AppPolicy, from: Int64? = nil, to: Int64? = nil, ledger: any ComparisonLedger)
        async throws(VerificationError) -> MigrationReport {
        let (comparisons, truncated) = try await load(app.bundleId, from: from, to: to, ledger: ledger)
        return MigrationReport(bundleId: app.bundleId, comparisons: comparisons, criteria: ReadinessCriteria(app: app),
                               truncated: truncated)
    }

    /// Every comparison in the window, newest first, paging backwards through `comparedAt` (the
    /// ledger answers at most 1000 per query). The cursor is inclusive and ids are deduplicated,
    /// so comparisons sharing a millisecond across a page boundary are neither lost nor doubled.
    static func load(_ bundleId: String, from: Int64?, to: Int64?, ledger: any ComparisonLedger)
        async throws(VerificationError) -> (comparisons: [PurchaseComparison], truncated: Bool) {
        let pageSize = SQLLedger.maxComparisonLimit
        var seen: Set<String> = []
        var all: [PurchaseComparison] = []
        var cursor = to
        while all.count < maxComparisons {
            let page = try await ledger.comparisons(ComparisonQuery(bundleId: bundleId, from: from, to: cursor, limit: pageSize))
            let fresh = page.filter { seen.insert($0.id).inserted }
            all += fresh
            // A short page is the last one; a page with nothing new means a single millisecond holds
            // more than a page, which cannot be paged by time: stop rather than loop.
            guard page.count == pageSize, !fresh.isEmpty, let oldest = page.last?.comparedAt else { break }
            cursor = oldest
        }
        let counts = try await ledger.comparisonCounts(bundleId: bundleId, from: from, to: to)
        return (Array(all.prefix(maxComparisons)), counts.total > min(all.count, maxComparisons))
    }
}

extension DashboardEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route(method: "GET", path: "/dashboard", name: "dashboard",
              operation: OpenAPIOperation(
                summary: "Migration dashboard of one app (?app=BUNDLE, Bearer key of that app): readiness verdict per environment with every unmet criterion, cutover impact, path failures by class, agreement per day and field, disagreements by class and field (inline SVG), side-by-side table",
                query: DashboardEndpoint.queryParameters,
                responses: ["200": .object([
                    "description": "self-contained HTML page (no scripts, nothing loaded from the network); with format=csv the disagreements (one row per finding) and path failures as CSV",
                    "content": .object(["text/html": .object(["schema": OpenAPIDocument.string]),
                                        "text/csv": .object(["schema": OpenAPIDocument.string])]),
                ])]),
              // The app comes from the query (the page has one URL for every app); its own key opens it.
              handler: .app({ request, _ throws(VerificationError) in try DashboardEndpoint.bundleId(request) }) {
                  endpoints, request, app, _ throws(VerificationError) in
                  try await DashboardEndpoint.answer(request, app: app, ledger: try endpoints.comparisonLedger(),
                                                     rollouts: endpoints.rollouts)
              }),
    ]
}
