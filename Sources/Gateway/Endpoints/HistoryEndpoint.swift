import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// GET /v1/apps/{bundleId}/accounts/{account}/history?since=&limit=: what support needs to answer
/// "I paid but it's locked" (also `iapgw audit`): the account's verification attempts, newest first,
/// and each purchase chain it owns with its grants, state and notifications. Evidence appears as
/// the first 16 hex digits of its SHA-256 only.
public struct HistoryEndpoint: Sendable {
    public static let defaultLimit = 100
    public static let maxLimit = 1_000
    static let queryParameters: [QueryParameter] = [.integer("since", 0...Int64.max), .integer("limit", 1...Int64(maxLimit))]
    /// Hex digits of the evidence's SHA-256 shown: enough to match a client's copy, not to look it up.
    static let digestPrefixLength = 16

    let ledger: any Ledger
    let now: @Sendable () -> Int64

    func answer(_ request: HTTPRequest, app: AppPolicy, account: String) async throws(VerificationError) -> HTTPResponse {
        try RequestBody.validateAccount(account)
        let (since, limit) = try Self.window(request)
        return .json(200, try await audit(app: app, subject: .account(account), since: since, limit: limit).jsonText)
    }

    /// `since` and `limit` of a route that answers histories (this one, the order look-up).
    static func window(_ request: HTTPRequest) throws(VerificationError) -> (since: Int64, limit: Int) {
        let declared = queryParameters
        try declared.refuseUnknown(in: request.query)
        let since = try declared["since"].integer(in: request.query) ?? 0
        let limit = try declared["limit"].integer(in: request.query) ?? Int64(defaultLimit)
        return (since, Int(limit))
    }

    /// `iapgw audit` (`GatewayParts.audit`): the history as the route shows it.
    func audit(app: AppPolicy, subject: SupportSubject, since: Int64, limit: Int) async throws(VerificationError) -> JSONValue {
        let history = try await ledger.supportHistory(bundleId: app.bundleId, subject: subject, since: since, limit: limit)
        return Self.json(history, bundleId: app.bundleId, subject: subject, policy: app, now: now())
    }

    /// The history as the route and `iapgw audit` show it.
    public static func json(_ history: SupportHistory, bundleId: String, subject: SupportSubject, policy: AppPolicy,
                            now: Int64) -> JSONValue {
        var object: [String: JSONValue] = [
            "bundleId": .string(bundleId),
            "attempts": .array(history.attempts.map(json)),
            "chains": .array(history.chains.map { json($0, policy: policy, now: now) }),
            "truncated": .bool(history.truncated),
        ]
        switch subject {
        case .account(let account): object["account"] = .string(account)
        case .transaction(let id): object["transactionId"] = .string(id)
        }
        return .object(object)
    }

    static func json(_ a: AuditRecord) -> JSONValue {
        var o: [String: JSONValue] = [
            "time": .int(a.time), "evidenceKind": .string(a.evidenceKind),
            "evidenceSHA256Prefix": .string(String(a.evidenceSHA256.prefix(digestPrefixLength))),
            "verdict": .string(a.verdict.rawValue),
            "transactionIds": .array(a.transactionIds.map(JSONValue.string)),
            "productIds": .array(a.productIds.map(JSONValue.string)),
        ]
        if let v = a.account { o["account"] = .string(v) }
        if let v = a.requestId { o["requestId"] = .string(v) }
        if let v = a.clientVersion { o["clientVersion"] = .string(v) }
        if let v = a.environment { o["environment"] = .string(v) }
        if let v = a.appleStatus { o["appleStatus"] = .string(v) }
        if let v = a.errorCode { o["code"] = .string(v.rawValue) }
        if let v = a.adapter { o["adapter"] = .string(v) }
        return .object(o)
    }

    static func json(_ c: PurchaseChainHistory, policy: AppPolicy, now: Int64) -> JSONValue {
        var o: [String: JSONValue] = [
            "originalTransactionId": .string(c.originalTransactionId), "owner": .string(c.owner),
            "boundAt": .int(c.boundAt),
            "grants": .array(c.grants.map { (g) -> JSONValue in
                var grant: [String: JSONValue] = [
                    "transactionId": .string(g.transaction.transactionId), "productId": .string(g.transaction.productId),
                    "firstGrantedAt": .int(g.firstGrantedAt), "updatedAt": .int(g.updatedAt),
                    "source": .string(g.transaction.source),
                ]
                if let v = g.transaction.purchaseDate { grant["purchaseDate"] = .int(v) }
                if let v = g.transaction.expiresDate { grant["expiresDate"] = .int(v) }
                if let v = g.transaction.revocationDate { grant["revocationDate"] = .int(v) }
                if let v = g.transaction.revocationReason { grant["revocationReason"] = .int(v.rawValue) }
                if let v = g.transaction.environment { grant["environment"] = .string(v.rawValue) }
                return .object(grant)
            }),
            "notifications": .array(c.notifications.map { (n) -> JSONValue in
                var note: [String: JSONValue] = [
                    "notificationType": .string(n.notificationType), "signedDate": .int(n.signedDate),
                    "receivedAt": .int(n.receivedAt), "environment": .string(n.environment), "status": .string(n.status),
                ]
                if let v = n.subtype { note["subtype"] = .string(v) }
                return .object(note)
            }),
        ]
        if let e = c.entitlement {
            o["entitlement"] = EntitlementsEndpoint.json(EntitlementAccess.current(e, now: now), policy: policy)
        }
        if let s = c.subscription {
            var sub: [String: JSONValue] = ["state": .string(s.state.rawValue), "productId": .string(s.productId),
                                            "source": .string(s.source), "lastSignedDate": .int(s.lastSignedDate)]
            if let v = s.expiresDate { sub["expiresDate"] = .int(v) }
            if let v = s.autoRenewStatus { sub["autoRenewStatus"] = .int(v.rawValue) }
            o["subscription"] = .object(sub)
        }
        return .object(o)
    }
}

extension HistoryEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route(method: "GET", path: "/v1/apps/{bundleId}/accounts/{account}/history", name: "history",
              operation: OpenAPIOperation(
                summary: "Support history of an account: its verification attempts since `since` (ms; newest first, at most `limit`, default 100, up to 1000), each with request id, evidence kind, the evidence's SHA-256 prefix, X-Client-Version, environment, Apple's status, verdict and code; and each purchase chain it owns with grants (renewals, refunds), state and notifications",
                query: HistoryEndpoint.queryParameters,
                responses: ["200": .ok("History")]),
              handler: .app(Route.pathApp) { endpoints, request, app, parameters throws(VerificationError) in
                  try await endpoints.history.answer(request, app: app, account: parameters["account", default: ""])
              }),
    ]
}
