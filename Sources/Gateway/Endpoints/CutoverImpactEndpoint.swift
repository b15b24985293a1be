import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// GET /v1/apps/{bundleId}/cutover-impact[?from=&to=]: the cutover verdict and what switching the
/// app's receipts to the Server API now would change, per product and per account, as JSON (the
/// dashboard's "If you cut over now" and verdict sections, from the same `MigrationReport`).
enum CutoverImpactEndpoint {
    static let queryParameters: [QueryParameter] = [.integer("from", 0...Int64.max), .integer("to", 0...Int64.max)]

    static func answer(_ request: HTTPRequest, app: AppPolicy, ledger: any ComparisonLedger) async throws(VerificationError) -> HTTPResponse {
        try queryParameters.refuseUnknown(in: request.query)
        let range = try ComparisonsEndpoint.parse(request.query, bundleId: app.bundleId)
        let (comparisons, truncated) = try await DashboardEndpoint.load(app.bundleId, from: range.from, to: range.to, ledger: ledger)
        let report = MigrationReport(bundleId: app.bundleId, comparisons: comparisons, criteria: ReadinessCriteria(app: app),
                                     truncated: truncated)
        return .json(200, json(report).jsonText)
    }

    static func json(_ r: MigrationReport) -> JSONValue {
        var byProduct: [String: [MigrationReport.ImpactRow.Change: Int]] = [:]
        for row in r.impact { byProduct[row.productId, default: [:]][row.change, default: 0] += 1 }
        return .object([
            "bundleId": .string(r.bundleId),
            "verdict": verdict(r),
            "environments": .array(r.environments.map(environment)),
            "refusedByBoth": .int(Int64(r.refusedByBoth)),
            "truncated": .bool(r.truncated),
            "byProduct": .array(byProduct.keys.sorted().map { product in
                let c = byProduct[product]!
                return .object(["productId": .string(product), "losesAccess": .int(Int64(c[.losesAccess] ?? 0)),
                                "gainsAccess": .int(Int64(c[.gainsAccess] ?? 0)),
                                "differentExpiry": .int(Int64(c[.differentExpiry] ?? 0))])
            }),
            "accounts": .array(r.impact.map(row)),
        ])
    }

    static func verdict(_ r: MigrationReport) -> JSONValue {
        var reasons: [String] = []
        if case .notReady(let list) = r.verdict { reasons = list }
        return .object(["ready": .bool(r.verdict.isReady), "label": .string(r.verdict.label),
                        "environment": .string(r.criteria.primaryEnvironment),
                        "unmet": .array(reasons.map(JSONValue.string))])
    }

    static func environment(_ e: MigrationReport.EnvironmentVerdict) -> JSONValue {
        .object([
            "environment": .string(e.environment), "ready": .bool(e.isReady), "purchaseChains": .int(Int64(e.chains)),
            "agreedChains": .int(Int64(e.agreedChains)), "disagreeingChains": .int(Int64(e.disagreeingChains)),
            "unexplainedFailures": .int(Int64(e.unexplainedFailedChains)),
            "explainedFailures": .int(Int64(e.explainedFailedChains)), "accounts": .int(Int64(e.accounts)),
            "criteria": .array(e.criteria.map { .object(["met": .bool($0.met), "text": .string($0.text)]) }),
        ])
    }

    static func row(_ row: MigrationReport.ImpactRow) -> JSONValue {
        var o: [String: JSONValue] = [
            "change": .string(row.change.rawValue), "environment": .string(row.environment),
            "productId": .string(row.productId), "originalTransactionId": .string(row.originalTransactionId),
            "comparisonId": .string(row.comparisonId),
        ]
        if let v = row.account { o["account"] = .string(v) }
        o["legacyState"] = .string(row.legacyStateName)
        o["serverAPIState"] = .string(row.serverAPIStateName)
        if let v = row.legacyExpiresDate { o["legacyExpiresDate"] = .int(v) }
        if let v = row.serverAPIExpiresDate { o["serverAPIExpiresDate"] = .int(v) }
        return .object(o)
    }
}

extension CutoverImpactEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route(method: "GET", path: "/v1/apps/{bundleId}/cutover-impact", name: "cutover_impact",
              operation: OpenAPIOperation(
                summary: "The cutover verdict (every unmet criterion, per environment) and who would lose or gain access or see another expiry if the app's receipts switched to the Server API now",
                query: CutoverImpactEndpoint.queryParameters,
                responses: ["200": .ok("CutoverImpact")]),
              handler: .app(Route.pathApp) { endpoints, request, app, _ throws(VerificationError) in
                  try await CutoverImpactEndpoint.answer(request, app: app, ledger: try endpoints.comparisonLedger())
              }),
    ]
}
