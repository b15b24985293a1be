import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// A type that declares routes of the gateway: each endpoint its own, beside the work they run.
protocol RouteDeclaring {
    static var routes: [Route] { get }
}

/// One route of the gateway, declared once by its endpoint: the dispatcher matches it, its access
/// decides its own steps (`steps`), the metrics and logs name it, and the OpenAPI document
/// describes it, so none of them can know a route the others do not.
final class Route: Sendable {
    /// The `{name}` segments of the path, by name (percent-decoded).
    typealias Parameters = [String: String]
    /// Where a request names its app.
    typealias AppName = @Sendable (HTTPRequest, Parameters) throws(VerificationError) -> String

    enum Handler: Sendable {
        /// Anyone may call it, and it is for no app: probes, the document, metrics.
        case open(@Sendable (GatewayEndpoints, HTTPRequest, Parameters) async throws(VerificationError) -> HTTPResponse)
        /// Anyone may call it for the app its path names: Apple, which holds no API key, so the
        /// endpoint trusts the signatures of what it is sent only.
        case signed(@Sendable (GatewayEndpoints, HTTPRequest, AppPolicy) async throws(VerificationError) -> HTTPResponse)
        /// Runs only once the app `app` names is configured and the request carries that app's key;
        /// the OpenAPI document marks it as needing the key.
        case app(_ app: AppName,
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

    /// A route that answers its JSON `answer` (200); `refusals` are its endpoint's other outcomes
    /// only, as `OpenAPIDocument` merges in what its kind and steps refuse.
    convenience init<Value>(_ method: String, _ path: String, name: String, query: [QueryParameter] = [], body: String? = nil,
                            callsApple: Bool = false, answer: JSONShape<Value>, summary: String,
                            refusals: [String: OpenAPIResponse] = [:], handler: Handler) {
        let operation = OpenAPIOperation(summary: summary, query: query, requestBody: body, callsApple: callsApple,
                                         responses: refusals.merging(["200": .ok(answer)]) { _, ok in ok })
        self.init(method: method, path: path, name: name, operation: operation, handler: handler)
    }

    var requiresAppKey: Bool {
        switch handler {
        case .app, .keyed: true
        case .open, .signed: false
        }
    }

    /// Whether a request names an app the route looks up (UNKNOWN_APP when it is not configured).
    var namesApp: Bool {
        if case .open = handler { return false }
        return true
    }

    /// Whether the route is Apple's call, trusted for its signatures only (`Handler.signed`).
    var takesSignedCall: Bool {
        if case .signed = handler { return true }
        return false
    }

    var takesIdempotencyKey: Bool {
        if case .keyed = handler { return true }
        return false
    }

    /// The route's own steps, in order, between the shared ones and its endpoint: the app it names
    /// (UNKNOWN_APP first), that app's key, then the `Idempotency-Key`.
    func steps(apps: [String: AppPolicy], authenticator: APIKeyAuthenticator, idempotency: IdempotencyKeys) -> [any Middleware] {
        switch handler {
        case .open: []
        case .signed: [AppLookup(apps: apps, bundleId: Self.pathApp)]
        case .app(let app, _): [AppLookup(apps: apps, bundleId: app), authenticator]
        case .keyed: [AppLookup(apps: apps, bundleId: Self.pathApp), authenticator, idempotency]
        }
    }

    /// Runs the endpoint with what the route's steps put in `context`.
    func respond(_ endpoints: GatewayEndpoints, _ request: HTTPRequest,
                 _ context: RequestContext) async throws(VerificationError) -> HTTPResponse {
        switch handler {
        case .open(let handle): try await handle(endpoints, request, context.parameters)
        case .signed(let handle): try await handle(endpoints, request, try context.requiredApp())
        case .app(_, let handle): try await handle(endpoints, request, try context.requiredApp(), context.parameters)
        case .keyed(let handle): try await handle(endpoints, request, try context.requiredApp(), context.idempotency)
        }
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

    /// What every route that names an app can answer beside its endpoint's own outcomes: each reads
    /// or writes the app's stored data, and each reads the app its steps looked up.
    static let appDataRefusals = [
        OpenAPIRefusal(status: "500", description: "the gateway's configuration cannot serve the request (INVALID_CONFIGURATION: such as a key or credentials the app's policy names that cannot be read, or none where the route needs one) or an internal fault (INTERNAL_ERROR); not retryable"),
        OpenAPIRefusal(status: "503", description: "storage unavailable, or it did not confirm a commit sent (STORAGE_UNAVAILABLE, STORAGE_OUTCOME_UNKNOWN); see Retry-After",
                       headers: ["Retry-After"]),
    ]

    /// What Apple's calls (`Handler.signed`) refuse of a signed body that does not verify.
    static let signedCallRefusals = [
        OpenAPIRefusal(status: "422", description: "forged or foreign: a signature, identity or content check failed"),
    ]

    /// The app of a route under `/v1/apps/{bundleId}/`.
    static let pathApp: AppName = { _, p in p["bundleId", default: ""] }

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
    /// Every route of the gateway, from the types that declare them.
    static let all: [Route] = ([
        ReadinessEndpoint.self, OpenAPIDocument.self, MetricsEndpoint.self, DashboardEndpoint.self, NoncesEndpoint.self,
        VerifyEndpoint.self, OfferSignaturesEndpoint.self, EntitlementsEndpoint.self, HistoryEndpoint.self,
        OrderLookupEndpoint.self, NotificationsEndpoint.self, RetentionEndpoint.self, ComparisonsEndpoint.self,
        CutoverImpactEndpoint.self, RolloutEndpoint.self,
    ] as [any RouteDeclaring.Type]).flatMap { $0.routes }
}
