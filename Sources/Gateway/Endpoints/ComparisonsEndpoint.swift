import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// GET /v1/apps/{bundleId}/comparisons?from=&to=&class=&field=&productId=&failure=&limit=
enum ComparisonsEndpoint {
    static let defaultLimit = 100
    static let queryParameters: [QueryParameter] = [
        .integer("from", 0...Int64.max), .integer("to", 0...Int64.max),
        .oneOf("class", ComparisonDifference.Kind.allCases.map(\.rawValue)),
        .text("field"), .text("productId"), .text("failure"),
        .integer("limit", 1...Int64(SQLLedger.maxComparisonLimit)),
    ]

    static func answer(_ request: HTTPRequest, app: AppPolicy, ledger: any ComparisonLedger) async throws(VerificationError)
        -> HTTPResponse {
        let query = try parse(request.query, bundleId: app.bundleId)
        let found = try await ledger.comparisons(query)
        let counts = try await ledger.comparisonCounts(bundleId: app.bundleId, from: query.from, to: query.to)
        return .json(200, ComparisonAnswers.listed.encode(.init(bundleId: app.bundleId, counts: counts, comparisons: found)).jsonText)
    }

    static func parse(_ parameters: [String: String], bundleId: String) throws(VerificationError) -> ComparisonQuery {
        let declared = queryParameters
        try declared.refuseUnknown(in: parameters)
        return ComparisonQuery(bundleId: bundleId, from: try declared["from"].integer(in: parameters),
                               to: try declared["to"].integer(in: parameters),
                               kind: try declared["class"].value(in: parameters).flatMap(ComparisonDifference.Kind.init(rawValue:)),
                               field: try declared["field"].value(in: parameters),
                               productId: try declared["productId"].value(in: parameters),
                               failureCode: try declared["failure"].value(in: parameters),
                               limit: Int(try declared["limit"].integer(in: parameters) ?? Int64(defaultLimit)))
    }
}

extension ComparisonsEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route("GET", "/v1/apps/{bundleId}/comparisons", name: "comparisons", query: queryParameters, answer: ComparisonAnswers.listed,
              summary: "Stored migration comparisons (legacy vs Server API), filtered by time (ms), class, field, product and failure code (either path's error); with agreement counts",
              handler: .app(Route.pathApp) { endpoints, request, app, _ throws(VerificationError) in
                  try await ComparisonsEndpoint.answer(request, app: app, ledger: try endpoints.comparisonLedger())
              }),
    ]
}
