import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// GET /v1/apps/{bundleId}/accounts/{account}/entitlements: the account's entitlements as they
/// stand now (the clock may have ended some since they were stored).
struct EntitlementsEndpoint: Sendable {
    let ledger: any Ledger
    let now: @Sendable () -> Int64

    func answer(app: AppPolicy, account: String) async throws(VerificationError) -> HTTPResponse {
        try RequestBody.validateAccount(account)
        let now = now()
        let entitlements = try await ledger.entitlements(bundleId: app.bundleId, account: account)
        return .json(200, JSONValue.object([
            "account": .string(account),
            "entitlements": .array(entitlements.map { Self.json(EntitlementAccess.current($0, now: now), policy: app) }),
        ]).jsonText)
    }

    /// One entitlement as every answer shows it; `e` must already stand at the answer's time
    /// (`EntitlementAccess.current`).
    static func json(_ e: Entitlement, policy: AppPolicy) -> JSONValue {
        var object: [String: JSONValue] = [
            "productId": .string(e.productId), "state": .string(e.state.rawValue),
            "originalTransactionId": .string(e.originalTransactionId), "source": .string(e.source),
            "grantsAccess": .bool(EntitlementAccess.grantsAccess(e.state, policy: policy.gracePeriodPolicy)),
        ]
        if let expires = e.expiresDate { object["expiresDate"] = .int(expires) }
        if let commitment = e.commitmentExpiresDate { object["commitmentExpiresDate"] = .int(commitment) }
        return .object(object)
    }
}

extension EntitlementsEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route(method: "GET", path: "/v1/apps/{bundleId}/accounts/{account}/entitlements", name: "entitlements",
              operation: OpenAPIOperation(summary: "Current entitlements of an account", responses: ["200": .ok("Entitlements")]),
              handler: .app(Route.pathApp) { endpoints, _, app, parameters throws(VerificationError) in
                  try await endpoints.entitlements.answer(app: app, account: parameters["account", default: ""])
              }),
    ]
}
