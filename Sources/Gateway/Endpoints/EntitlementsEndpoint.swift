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
        let shown = entitlements.map { Shown(EntitlementAccess.current($0, now: now), policy: app) }
        return .json(200, Self.answer.encode(Answer(account: account, entitlements: shown)).jsonText)
    }

    struct Answer: Sendable {
        let account: String
        let entitlements: [Shown]
    }

    static let answer = JSONShape<Answer>.object([
        .required("account", .string) { $0.account },
        .required("entitlements", .array(entitlement)) { $0.entitlements },
    ]).named("Entitlements")

    /// One entitlement as every answer shows it, standing at the answer's time, with whether the
    /// app's grace-period policy gives access in its state.
    struct Shown: Sendable {
        let entitlement: Entitlement
        let grantsAccess: Bool

        /// `e` must already stand at the answer's time (`EntitlementAccess.current`).
        init(_ e: Entitlement, policy: AppPolicy) {
            entitlement = e
            grantsAccess = EntitlementAccess.grantsAccess(e.state, policy: policy.gracePeriodPolicy)
        }
    }

    static let entitlement = JSONShape<Shown>.object([
        .required("productId", .string) { $0.entitlement.productId },
        .required("state", JSONShape<Entitlement.State>.cases.described(
            "as it stands at the answer's time (dates judged with a \(EntitlementAccess.clockSkewAllowanceMillis) ms clock-skew allowance); credited: a consumable, credited once (newlyGranted) and never lasting access (grantsAccess false; refunded after a refund)")) { $0.entitlement.state },
        .required("originalTransactionId", .string) { $0.entitlement.originalTransactionId },
        .optional("expiresDate", JSONShape<Int64>.integer.described("end of the state's period (in grace: the grace period's end)")) {
            $0.entitlement.expiresDate
        },
        .optional("commitmentExpiresDate", JSONShape<Int64>.integer.described(
            "a monthly plan with a commitment: when the commitment ends (access follows expiresDate)")) { $0.entitlement.commitmentExpiresDate },
        .required("source", .string) { $0.entitlement.source },
        .required("grantsAccess", .boolean) { $0.grantsAccess },
    ]).named("Entitlement")

    /// One entitlement as every answer shows it; `e` must already stand at the answer's time
    /// (`EntitlementAccess.current`).
    static func json(_ e: Entitlement, policy: AppPolicy) -> JSONValue { entitlement.encode(Shown(e, policy: policy)) }
}

extension EntitlementsEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route("GET", "/v1/apps/{bundleId}/accounts/{account}/entitlements", name: "entitlements", answer: answer,
              summary: "Current entitlements of an account",
              handler: .app(Route.pathApp) { endpoints, _, app, parameters throws(VerificationError) in
                  try await endpoints.entitlements.answer(app: app, account: parameters["account", default: ""])
              }),
    ]
}
