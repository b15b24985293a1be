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
        return .json(200, answer.encode(report).jsonText)
    }

    /// Per product, how many of its chains a cutover changes, and how.
    struct ProductImpact: Sendable {
        let productId: String
        let changes: [MigrationReport.ImpactRow.Change: Int]
    }

    static func byProduct(_ r: MigrationReport) -> [ProductImpact] {
        var byProduct: [String: [MigrationReport.ImpactRow.Change: Int]] = [:]
        for row in r.impact { byProduct[row.productId, default: [:]][row.change, default: 0] += 1 }
        return byProduct.keys.sorted().map { ProductImpact(productId: $0, changes: byProduct[$0]!) }
    }

    /// A path's state in an impact row: an entitlement state, or notFound where its answer lacks the chain.
    private static let impactState = JSONShape<String>.oneOf(
        Entitlement.State.allCases.map(\.rawValue) + [MigrationReport.ImpactRow.notFound]
    ).described("the entitlement this path would answer; notFound: its answer lacks the purchase chain (a purchase the Server API does not know)")

    static let answer = JSONShape<MigrationReport>.object([
        .required("bundleId", .string) { $0.bundleId },
        .required("verdict", .object([
            .required("ready", .boolean) { $0.verdict.isReady },
            .required("label", .string) { $0.verdict.label },
            .required("environment", .string) { $0.criteria.primaryEnvironment },
            .required("unmet", .array(.string)) { r in if case .notReady(let list) = r.verdict { list } else { [] } },
        ])) { $0 },
        .required("environments", .array(.object([
            .required("environment", .string) { $0.environment },
            .required("ready", .boolean) { $0.isReady },
            .required("purchaseChains", .count) { $0.chains },
            .required("agreedChains", .count) { $0.agreedChains },
            .required("disagreeingChains", .count) { $0.disagreeingChains },
            .required("unexplainedFailures", .count) { $0.unexplainedFailedChains },
            .required("explainedFailures", .count) { $0.explainedFailedChains },
            .required("accounts", .count) { $0.accounts },
            .required("criteria", .array(.object([
                .required("met", .boolean) { $0.met },
                .required("text", .string) { $0.text },
            ]))) { $0.criteria },
        ]))) { $0.environments },
        .required("refusedByBoth", .count) { $0.refusedByBoth },
        .required("truncated", .boolean) { $0.truncated },
        .required("byProduct", .array(.object([
            .required("productId", .string) { $0.productId },
            .required("losesAccess", .count) { $0.changes[.losesAccess] ?? 0 },
            .required("gainsAccess", .count) { $0.changes[.gainsAccess] ?? 0 },
            .required("differentExpiry", .count) { $0.changes[.differentExpiry] ?? 0 },
        ]))) { byProduct($0) },
        .required("accounts", .array(.object([
            .required("change", .cases) { $0.change },
            .required("environment", .string) { $0.environment },
            .optional("account", .string) { $0.account },
            .required("productId", .string) { $0.productId },
            .required("originalTransactionId", .string) { $0.originalTransactionId },
            .required("legacyState", impactState) { $0.legacyStateName },
            .required("serverAPIState", impactState) { $0.serverAPIStateName },
            .optional("legacyExpiresDate", .integer) { $0.legacyExpiresDate },
            .optional("serverAPIExpiresDate", .integer) { $0.serverAPIExpiresDate },
            .required("comparisonId", .string) { $0.comparisonId },
        ]))) { $0.impact },
    ]).named("CutoverImpact")
}

extension CutoverImpactEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route("GET", "/v1/apps/{bundleId}/cutover-impact", name: "cutover_impact", query: queryParameters, answer: answer,
              summary: "The cutover verdict (every unmet criterion, per environment) and who would lose or gain access or see another expiry if the app's receipts switched to the Server API now",
              handler: .app(Route.pathApp) { endpoints, request, app, _ throws(VerificationError) in
                  try await CutoverImpactEndpoint.answer(request, app: app, ledger: try endpoints.comparisonLedger())
              }),
    ]
}
