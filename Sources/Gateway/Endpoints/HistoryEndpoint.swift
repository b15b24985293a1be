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
        answer.encode(Shown(history: history, bundleId: bundleId, subject: subject,
                            chains: history.chains.map { chain in
                                (chain, chain.entitlement.map { EntitlementsEndpoint.Shown(EntitlementAccess.current($0, now: now),
                                                                                           policy: policy) })
                            }))
    }

    struct Shown: Sendable {
        let history: SupportHistory
        let bundleId: String
        let subject: SupportSubject
        /// Each chain with its entitlement as it stands at the answer's time.
        let chains: [(chain: PurchaseChainHistory, entitlement: EntitlementsEndpoint.Shown?)]
    }

    static let attempt = JSONShape<AuditRecord>.object([
        .required("time", .integer) { $0.time },
        .optional("requestId", .string) { $0.requestId },
        .required("evidenceKind", .string) { $0.evidenceKind },
        .required("evidenceSHA256Prefix", JSONShape<String>.string.described(
            "the first 16 hex digits of the evidence's SHA-256; the evidence itself is never kept")) {
            String($0.evidenceSHA256.prefix(digestPrefixLength))
        },
        .optional("clientVersion", JSONShape<String>.string.described(
            "the app backend's X-Client-Version header, at most 64 printable ASCII characters (quotes, backslashes, apostrophes, backticks and markup as ?)")) {
            $0.clientVersion
        },
        .optional("environment", .string) { $0.environment },
        .optional("appleStatus", JSONShape<String>.string.described(
            "what Apple answered, in order: verifyReceipt statuses (\"21007 0\") or Server API failures (\"HTTP 404 errorCode 4040010\")")) {
            $0.appleStatus
        },
        .required("verdict", JSONShape<AuditVerdict>.cases.described(
            "what the attempt was answered: the 200's verdict (granted, notGranted), or refused with code")) { $0.verdict },
        .optional("code", .string) { $0.errorCode?.rawValue },
        .optional("adapter", .string) { $0.adapter },
        .optional("account", .string) { $0.account },
        .required("transactionIds", .array(.string)) { $0.transactionIds },
        .required("productIds", .array(.string)) { $0.productIds },
    ])

    static let grant = JSONShape<PurchaseChainHistory.Grant>.object([
        .required("transactionId", .string) { $0.transaction.transactionId },
        .required("productId", .string) { $0.transaction.productId },
        .required("firstGrantedAt", .integer) { $0.firstGrantedAt },
        .required("updatedAt", .integer) { $0.updatedAt },
        .optional("purchaseDate", .integer) { $0.transaction.purchaseDate },
        .optional("expiresDate", .integer) { $0.transaction.expiresDate },
        .optional("revocationDate", .integer) { $0.transaction.revocationDate },
        .optional("revocationReason", .integer) { $0.transaction.revocationReason?.rawValue },
        .optional("environment", .string) { $0.transaction.environment?.rawValue },
        .required("source", .string) { $0.transaction.source },
    ])

    static let subscription = JSONShape<SubscriptionState>.object([
        .required("state", .cases) { $0.state },
        .required("productId", .string) { $0.productId },
        .optional("expiresDate", .integer) { $0.expiresDate },
        .optional("autoRenewStatus", .integer) { $0.autoRenewStatus?.rawValue },
        .required("source", .string) { $0.source },
        .required("lastSignedDate", .integer) { $0.lastSignedDate },
    ])

    static let notification = JSONShape<PurchaseChainHistory.Notification>.object([
        .required("notificationType", .string) { $0.notificationType },
        .optional("subtype", .string) { $0.subtype },
        .required("signedDate", .integer) { $0.signedDate },
        .required("receivedAt", .integer) { $0.receivedAt },
        .required("environment", .string) { $0.environment },
        .required("status", .oneOf(["processed", "parked", "pending"])) { $0.status },
    ])

    static let chain = JSONShape<(chain: PurchaseChainHistory, entitlement: EntitlementsEndpoint.Shown?)>.object([
        .required("originalTransactionId", .string) { $0.chain.originalTransactionId },
        .required("owner", .string) { $0.chain.owner },
        .required("boundAt", .integer) { $0.chain.boundAt },
        .required("grants", .array(grant)) { $0.chain.grants },
        .optional("entitlement", EntitlementsEndpoint.entitlement) { $0.entitlement },
        .optional("subscription", subscription) { $0.chain.subscription },
        .required("notifications", .array(notification)) { $0.chain.notifications },
    ])

    static let answer = JSONShape<Shown>.object([
        .required("bundleId", .string) { $0.bundleId },
        .optional("account", .string) { if case .account(let account) = $0.subject { account } else { nil } },
        .optional("transactionId", .string) { if case .transaction(let id) = $0.subject { id } else { nil } },
        .required("truncated", .boolean) { $0.history.truncated },
        .required("attempts", .array(attempt)) { $0.history.attempts },
        .required("chains", .array(chain)) { $0.chains },
    ]).named("History")
}

extension HistoryEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route("GET", "/v1/apps/{bundleId}/accounts/{account}/history", name: "history", query: queryParameters, answer: answer,
              summary: "Support history of an account: its verification attempts since `since` (ms; newest first, at most `limit`, default 100, up to 1000), each with request id, evidence kind, the evidence's SHA-256 prefix, X-Client-Version, environment, Apple's status, verdict and code; and each purchase chain it owns with grants (renewals, refunds), state and notifications",
              handler: .app(Route.pathApp) { endpoints, request, app, parameters throws(VerificationError) in
                  try await endpoints.history.answer(request, app: app, account: parameters["account", default: ""])
              }),
    ]
}
