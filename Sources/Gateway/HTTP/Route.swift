import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// What the gateway's routes are handed: one of each endpoint, built by the service from its parts.
struct GatewayEndpoints: Sendable {
    let readiness: ReadinessEndpoint
    let metrics: MetricsEndpoint
    /// The OpenAPI document, its verify request built from the registered adapters' evidence forms.
    let openAPI: String
    /// Keyed routes' `Idempotency-Key`s.
    let idempotency: IdempotencyKeys
    let nonces: NoncesEndpoint
    let verify: VerifyEndpoint
    let entitlements: EntitlementsEndpoint
    let offerSignatures: OfferSignaturesEndpoint
    let history: HistoryEndpoint
    let orders: OrderLookupEndpoint
    let notifications: NotificationsEndpoint
    let retention: RetentionEndpoint
    /// Where the comparison routes read from; nil: they answer 404.
    let comparisons: (any ComparisonLedger)?
    /// Receipt rollouts (GET …/rollout); nil: that route answers 404.
    let rollouts: RolloutController?

    func comparisonLedger() throws(VerificationError) -> any ComparisonLedger {
        guard let comparisons else { throw VerificationError(.notFound, "comparisons are not enabled") }
        return comparisons
    }
}

/// One route of the gateway, declared once: the dispatcher matches it, the metrics and logs name
/// it, and the OpenAPI document describes it, so none of them can know a route the others do not.
struct Route: Sendable {
    /// The `{name}` segments of the path, by name (percent-decoded).
    typealias Parameters = [String: String]

    enum Handler: Sendable {
        /// Anyone may call it: probes, and Apple's notifications (trusted by their signatures).
        case open(@Sendable (GatewayEndpoints, HTTPRequest, Parameters) async throws(VerificationError) -> HTTPResponse)
        /// Runs only once the app `app` names is configured and the request carries that app's key;
        /// the OpenAPI document marks it as needing the key.
        case app(_ app: @Sendable (HTTPRequest, Parameters) throws(VerificationError) -> String,
                 @Sendable (GatewayEndpoints, HTTPRequest, AppPolicy, Parameters) async throws(VerificationError) -> HTTPResponse)
        /// An app route that grants or hands out something once: it takes an `Idempotency-Key`
        /// (`IdempotencyKeys`), handed to the endpoint, which stores its answer with its work.
        case keyed(@Sendable (GatewayEndpoints, HTTPRequest, AppPolicy, IdempotentWrite?) async throws(VerificationError) -> HTTPResponse)
    }

    let method: String
    /// The path template: literal segments and `{name}` parameters.
    let path: String
    /// A low-cardinality name for metrics and logs (never the bundle id or account).
    let name: String
    let operation: OpenAPIOperation
    let handler: Handler
    /// `path` split once: matching runs for every route on every request.
    private let template: [Substring]

    init(method: String, path: String, name: String, operation: OpenAPIOperation, handler: Handler) {
        self.method = method
        self.path = path
        self.name = name
        self.operation = operation
        self.handler = handler
        self.template = path.split(separator: "/")
    }

    var requiresAppKey: Bool {
        switch handler {
        case .app, .keyed: true
        case .open: false
        }
    }

    var takesIdempotencyKey: Bool {
        if case .keyed = handler { return true }
        return false
    }

    /// The path's parameters when `segments` is this route's path; nil otherwise.
    func parameters(_ segments: [String]) -> Parameters? {
        guard segments.count == template.count else { return nil }
        var parameters: Parameters = [:]
        for (segment, part) in zip(segments, template) {
            if part.hasPrefix("{") && part.hasSuffix("}") {
                parameters[String(part.dropFirst().dropLast())] = segment
            } else if segment != part {
                return nil
            }
        }
        return parameters
    }

    /// The app of a route under `/v1/apps/{bundleId}/`.
    static let pathApp: @Sendable (HTTPRequest, Parameters) throws(VerificationError) -> String = { _, p in p["bundleId", default: ""] }

    /// What a request asks for: a route (with its path's parameters), a path taking other methods, or nothing.
    enum Match {
        case route(Route, Parameters)
        /// The path is a route's, the method is not: `allowed` is the methods it takes (the `Allow` header).
        case methodNotAllowed(allowed: String)
        case notFound

        /// The name metrics and logs use.
        var name: String {
            switch self {
            case .route(let route, _): route.name
            case .methodNotAllowed: "method_not_allowed"
            case .notFound: "not_found"
            }
        }
    }

    static func match(method: String, segments: [String]?, in routes: [Route] = Route.all) -> Match {
        guard let segments else { return .notFound }
        var allowed: [String] = []
        for route in routes {
            guard let parameters = route.parameters(segments) else { continue }
            if route.method == method { return .route(route, parameters) }
            allowed.append(route.method)
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed: allowed.joined(separator: ", "))
    }
}

extension Route {
    /// Every route of the gateway.
    static let all: [Route] = [
        Route(method: "GET", path: "/healthz", name: "healthz",
              operation: OpenAPIOperation(summary: "Liveness", responses: ["200": .ok("Status")]),
              handler: .open { _, _, _ in .json(200, #"{"status":"ok"}"#) }),
        Route(method: "GET", path: "/readyz", name: "readyz",
              operation: OpenAPIOperation(summary: "Readiness (storage answers within 1 s and takes writes)",
                                          responses: ["200": .ok("Status"), "503": .error("not ready")]),
              handler: .open { endpoints, _, _ throws(VerificationError) in try await endpoints.readiness.answer() }),
        Route(method: "GET", path: "/openapi.json", name: "openapi",
              operation: OpenAPIOperation(summary: "This document",
                                          responses: ["200": .object(["description": "OpenAPI 3 document"])]),
              handler: .open { endpoints, _, _ in .json(200, endpoints.openAPI) }),
        Route(method: "GET", path: "/metrics", name: "metrics",
              operation: OpenAPIOperation(summary: "Prometheus metrics",
                                          responses: ["200": .object(["description": "text/plain metrics"])]),
              handler: .open { endpoints, _, _ in await endpoints.metrics.answer() }),
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
                  try await DashboardEndpoint.answer(request, app: app, ledger: try endpoints.comparisonLedger(), rollouts: endpoints.rollouts)
              }),
        Route(method: "POST", path: "/v1/apps/{bundleId}/nonces", name: "nonces",
              operation: OpenAPIOperation(summary: "Issue a single-use nonce bound to an account, to send with a receipt",
                                          requestBody: "NonceRequest", responses: ["200": .ok("Nonce")]),
              handler: .keyed { endpoints, request, app, key throws(VerificationError) in
                  try await endpoints.nonces.answer(request, app: app, key: key)
              }),
        Route(method: "POST", path: "/v1/apps/{bundleId}/verify", name: "verify",
              operation: OpenAPIOperation(
                summary: "Verify purchase evidence, bind it to the account and answer its entitlements",
                requestBody: "VerifyRequest",
                responses: [
                    "200": .ok("VerifyResponse"),
                    "409": .error("bound to another account (TRANSACTION_BOUND_TO_OTHER_ACCOUNT)"),
                    "413": .error("body too large (INPUT_TOO_LARGE)"),
                    "422": .error("the evidence was refused, its content included (see the error code)"),
                    "500": .error("the gateway's configuration or an internal fault (INVALID_CONFIGURATION, INTERNAL_ERROR); not retryable"),
                    "502": .error("Apple refused the gateway's credentials (UPSTREAM_CREDENTIALS_REJECTED) or answered in a shape the gateway cannot use (UPSTREAM_INVALID_RESPONSE)"),
                    "503": .error("Apple or storage unavailable (nothing was stored), or Apple's Retry-After is beyond the request's budget; see Retry-After (Apple's own when it sent one). STORAGE_OUTCOME_UNKNOWN: the storage did not confirm a commit sent; retry with the same Idempotency-Key to learn its outcome"),
                ]),
              handler: .keyed { endpoints, request, app, key throws(VerificationError) in
                  try await endpoints.verify.answer(request, app: app, key: key)
              }),
        Route(method: "POST", path: "/v1/apps/{bundleId}/offer-signatures", name: "offer_signatures",
              operation: OpenAPIOperation(
                summary: "Sign a subscription offer for StoreKit (promotional offer v1 or v2, introductory offer eligibility), only for an account and product the app's policy allows",
                requestBody: "OfferSignatureRequest",
                responses: [
                    "200": .ok("OfferSignature"),
                    "403": .error("the app's policy does not give this account this offer (OFFER_NOT_ALLOWED)"),
                    "500": .error("the offer signing key cannot be read (INVALID_CONFIGURATION)"),
                    "503": .error("storage unavailable; see Retry-After"),
                ]),
              handler: .keyed { endpoints, request, app, key throws(VerificationError) in
                  try await endpoints.offerSignatures.answer(request, app: app, key: key)
              }),
        Route(method: "GET", path: "/v1/apps/{bundleId}/accounts/{account}/entitlements", name: "entitlements",
              operation: OpenAPIOperation(summary: "Current entitlements of an account", responses: ["200": .ok("Entitlements")]),
              handler: .app(pathApp) { endpoints, _, app, parameters throws(VerificationError) in
                  try await endpoints.entitlements.answer(app: app, account: parameters["account", default: ""])
              }),
        Route(method: "GET", path: "/v1/apps/{bundleId}/accounts/{account}/history", name: "history",
              operation: OpenAPIOperation(
                summary: "Support history of an account: its verification attempts since `since` (ms; newest first, at most `limit`, default 100, up to 1000), each with request id, evidence kind, the evidence's SHA-256 prefix, X-Client-Version, environment, Apple's status, verdict and code; and each purchase chain it owns with grants (renewals, refunds), state and notifications",
                query: HistoryEndpoint.queryParameters,
                responses: ["200": .ok("History")]),
              handler: .app(pathApp) { endpoints, request, app, parameters throws(VerificationError) in
                  try await endpoints.history.answer(request, app: app, account: parameters["account", default: ""])
              }),
        Route(method: "GET", path: "/v1/apps/{bundleId}/orders/{orderId}", name: "order_lookup",
              operation: OpenAPIOperation(
                summary: "Support: the order ID of a customer's App Store receipt e-mail. Apple's transactions of the order (Look Up Order ID), each verified like any other JWS, with the account here that owns its purchase chain (absent when none does), and each such account's history as the history route shows it (`since`, `limit` as there)",
                query: HistoryEndpoint.queryParameters,
                responses: [
                    "200": .ok("OrderLookup"),
                    "400": .error("an order id that is not 1 to 64 letters and digits, or a bad since/limit (MALFORMED_REQUEST)"),
                    "404": .error("unknown app (UNKNOWN_APP), or an order Apple does not know in any environment the app allows (ORDER_NOT_FOUND)"),
                    "422": .error("Apple's answer did not verify (a signature, chain or identity check failed)"),
                    "500": .error("the app has no Server API credentials (INVALID_CONFIGURATION)"),
                    "502": .error("Apple refused the gateway's credentials or answered in a shape the gateway cannot use"),
                    "503": .error("Apple or storage unavailable; see Retry-After"),
                ]),
              handler: .app(pathApp) { endpoints, request, app, parameters throws(VerificationError) in
                  try await endpoints.orders.answer(request, app: app, orderId: parameters["orderId", default: ""])
              }),
        Route(method: "POST", path: "/v1/notifications/{bundleId}", name: "notifications",
              operation: OpenAPIOperation(
                summary: "App Store Server Notifications (V2 signedPayload, or V1 with the shared secret); 200 once stored durably, a genuine notification of a type or shape not acted on yet included (forwarded to the webhook as an event of its own). Apple does not retry a 4xx: it answers only what is forged, foreign or malformed (README, Notification answers)",
                requestBody: "Notification",
                responses: [
                    "200": .ok("NotificationAccepted"),
                    "400": .error("a body that is not strict JSON or not a notification's shape (MALFORMED_REQUEST)"),
                    "401": .error("V1 notification without the shared secret", headers: ["WWW-Authenticate"]),
                    "404": .error("unknown app (UNKNOWN_APP)"),
                    "422": .error("forged or foreign: a signature, identity or content check failed; nothing was stored"),
                    "500": .error("the gateway's configuration or an internal fault"),
                    "502": .error("V1: Apple refused the gateway's shared secret"),
                    "503": .error("storage (or, for V1, Apple) unavailable; Apple retries"),
                ]),
              // Public: Apple holds no API key; the endpoint trusts the signatures only.
              handler: .open { endpoints, request, parameters throws(VerificationError) in
                  try await endpoints.notifications.answer(request, bundleId: parameters["bundleId", default: ""])
              }),
        Route(method: "POST", path: "/v1/retention/{bundleId}", name: "retention",
              operation: OpenAPIOperation(
                summary: "Retention Messaging API realtime URL (Apple calls it; signedPayload verified like a notification's): the RealtimeResponseBody the app's retentionMessages rules choose, {} for Apple's default message; every answer audited",
                requestBody: "RealtimeRequest",
                responses: [
                    "200": .ok("RealtimeResponse"),
                    "400": .error("a body that is not {\"signedPayload\"} (MALFORMED_REQUEST)"),
                    "404": .error("unknown app (UNKNOWN_APP)"),
                    "422": .error("a signature, identity or content check failed, or the request was signed more than 60 s ago (SIGNED_DATE_TOO_OLD: a replay); nothing is offered"),
                    "503": .error("storage unavailable; Apple shows its default message"),
                ]),
              // Public: Apple holds no API key; the endpoint trusts the signature only.
              handler: .open { endpoints, request, parameters throws(VerificationError) in
                  try await endpoints.retention.answer(request, bundleId: parameters["bundleId", default: ""])
              }),
        Route(method: "GET", path: "/v1/apps/{bundleId}/comparisons", name: "comparisons",
              operation: OpenAPIOperation(
                summary: "Stored migration comparisons (legacy vs Server API), filtered by time (ms), class, field, product and failure code (either path's error); with agreement counts",
                query: ComparisonsEndpoint.queryParameters,
                responses: ["200": .ok("Comparisons")]),
              handler: .app(pathApp) { endpoints, request, app, _ throws(VerificationError) in
                  try await ComparisonsEndpoint.answer(request, app: app, ledger: try endpoints.comparisonLedger())
              }),
        Route(method: "GET", path: "/v1/apps/{bundleId}/cutover-impact", name: "cutover_impact",
              operation: OpenAPIOperation(
                summary: "The cutover verdict (every unmet criterion, per environment) and who would lose or gain access or see another expiry if the app's receipts switched to the Server API now",
                query: CutoverImpactEndpoint.queryParameters,
                responses: ["200": .ok("CutoverImpact")]),
              handler: .app(pathApp) { endpoints, request, app, _ throws(VerificationError) in
                  try await CutoverImpactEndpoint.answer(request, app: app, ledger: try endpoints.comparisonLedger())
              }),
        Route(method: "GET", path: "/v1/apps/{bundleId}/rollout", name: "rollout",
              operation: OpenAPIOperation(
                summary: "The app's receipt rollout: its step and percentage, whether it is paused, what its guard says of the step now, the plan, the timeline of advances and rollbacks with their reasons, and each step's verdict",
                responses: ["200": .ok("Rollout"), "404": .error("unknown app (UNKNOWN_APP), or its receipts are not routed by a rollout (ROLLOUT_NOT_CONFIGURED)")]),
              handler: .app(pathApp) { endpoints, _, app, _ throws(VerificationError) in
                  try await RolloutEndpoint.answer(app, controller: endpoints.rollouts)
              }),
    ]
}
