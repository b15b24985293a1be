import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// GET /v1/apps/{bundleId}/comparisons?from=&to=&class=&field=&productId=&failure=&limit=
enum ComparisonsEndpoint {
    static let defaultLimit = 100
    static let queryParameters: [OpenAPIOperation.QueryParameter] = [
        ("from", "integer", false), ("to", "integer", false), ("class", "string", false), ("field", "string", false),
        ("productId", "string", false), ("failure", "string", false), ("limit", "integer", false),
    ]
    static let allowedParameters = Set(queryParameters.map(\.name))

    static func answer(_ request: HTTPRequest, app: AppPolicy, ledger: any ComparisonLedger) async throws(VerificationError)
        -> HTTPResponse {
        let query = try parse(request.query, bundleId: app.bundleId)
        let found = try await ledger.comparisons(query)
        let counts = try await ledger.comparisonCounts(bundleId: app.bundleId, from: query.from, to: query.to)
        return .json(200, JSONValue.object([
            "bundleId": .string(app.bundleId),
            "counts": .object(["total": .int(Int64(counts.total)), "agreed": .int(Int64(counts.agreed))]),
            "comparisons": .array(found.map(json)),
        ]).jsonText)
    }

    static func parse(_ parameters: [String: String], bundleId: String) throws(VerificationError) -> ComparisonQuery {
        if let unknown = parameters.keys.sorted().first(where: { !allowedParameters.contains($0) }) {
            throw VerificationError(.malformedRequest, "unknown query parameter \(ClientExcerpt.of(unknown))")
        }
        func integer(_ name: String, _ range: ClosedRange<Int64>) throws(VerificationError) -> Int64? {
            guard let text = parameters[name] else { return nil }
            guard let value = Int64(text), range.contains(value) else {
                throw VerificationError(.malformedRequest, "\(name) must be an integer in \(range.lowerBound)...\(range.upperBound)")
            }
            return value
        }
        func text(_ name: String) throws(VerificationError) -> String? {
            guard let value = parameters[name] else { return nil }
            guard !value.isEmpty, value.utf8.count <= 256 else {
                throw VerificationError(.malformedRequest, "\(name) must be 1 to 256 bytes")
            }
            return value
        }
        var kind: ComparisonDifference.Kind?
        if let raw = parameters["class"] {
            guard let k = ComparisonDifference.Kind(rawValue: raw) else {
                throw VerificationError(.malformedRequest, "class must be one of "
                                        + ComparisonDifference.Kind.allCases.map(\.rawValue).joined(separator: ", "))
            }
            kind = k
        }
        return ComparisonQuery(bundleId: bundleId, from: try integer("from", 0...Int64.max), to: try integer("to", 0...Int64.max),
                               kind: kind, field: try text("field"), productId: try text("productId"),
                               failureCode: try text("failure"),
                               limit: Int(try integer("limit", 1...Int64(SQLLedger.maxComparisonLimit)) ?? Int64(defaultLimit)))
    }

    static func json(_ c: PurchaseComparison) -> JSONValue {
        var o = MigrationRouter.json(c).objectValue ?? [:]
        o["comparedAt"] = .int(c.comparedAt)
        o["evidenceKind"] = .string(c.evidenceKind)
        o["evidenceSHA256"] = .string(c.evidenceSHA256)
        o["productIds"] = .array(c.productIds.map(JSONValue.string))
        if let v = c.account { o["account"] = .string(v) }
        if let v = c.environment { o["environment"] = .string(v) }
        if let v = c.appVersion { o["appVersion"] = .string(v) }
        o["purchases"] = .array(c.purchases.map(json))
        return .object(o)
    }

    static func json(_ p: ComparedPurchase) -> JSONValue {
        var o: [String: JSONValue] = ["originalTransactionId": .string(p.originalTransactionId),
                                      "productId": .string(p.productId), "agreed": .bool(p.agreed)]
        if let v = p.productType { o["productType"] = .string(v) }
        if let v = p.legacyState { o["legacyState"] = .string(v.rawValue) }
        if let v = p.legacyExpiresDate { o["legacyExpiresDate"] = .int(v) }
        if let v = p.serverAPIState { o["serverAPIState"] = .string(v.rawValue) }
        if let v = p.serverAPIExpiresDate { o["serverAPIExpiresDate"] = .int(v) }
        return .object(o)
    }
}
