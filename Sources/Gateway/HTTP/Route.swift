/// The gateway's routes. One table, used by the dispatcher and by the OpenAPI document, so the
/// document cannot describe a route that does not exist (a test walks it against the dispatcher).
enum Route: Equatable {
    case health, ready, openAPI, metrics, dashboard
    case issueNonce(bundleId: String)
    case verify(bundleId: String)
    case entitlements(bundleId: String, account: String)
    case history(bundleId: String, account: String)
    case notification(bundleId: String)
    case comparisons(bundleId: String)
    case cutoverImpact(bundleId: String)
    /// The path is a route's, the method is not: `allowed` is the method it takes (the `Allow` header).
    case methodNotAllowed(allowed: String)
    case notFound

    /// A low-cardinality name for metrics and logs (never the bundle id or account).
    var name: String {
        switch self {
        case .health: "healthz"
        case .ready: "readyz"
        case .openAPI: "openapi"
        case .metrics: "metrics"
        case .dashboard: "dashboard"
        case .issueNonce: "nonces"
        case .verify: "verify"
        case .entitlements: "entitlements"
        case .history: "history"
        case .notification: "notifications"
        case .comparisons: "comparisons"
        case .cutoverImpact: "cutover_impact"
        case .methodNotAllowed: "method_not_allowed"
        case .notFound: "not_found"
        }
    }

    /// (method, path template) of every route, for the OpenAPI document.
    static let table: [(method: String, path: String)] = [
        ("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/openapi.json"), ("GET", "/metrics"), ("GET", "/dashboard"),
        ("POST", "/v1/apps/{bundleId}/nonces"), ("POST", "/v1/apps/{bundleId}/verify"),
        ("GET", "/v1/apps/{bundleId}/accounts/{account}/entitlements"),
        ("GET", "/v1/apps/{bundleId}/accounts/{account}/history"),
        ("POST", "/v1/notifications/{bundleId}"), ("GET", "/v1/apps/{bundleId}/comparisons"),
        ("GET", "/v1/apps/{bundleId}/cutover-impact"),
    ]

    static func match(method: String, segments: [String]?) -> Route {
        guard let s = segments else { return .notFound }
        let route: Route
        let expected: String
        switch s.count {
        case 1 where s[0] == "healthz": (route, expected) = (.health, "GET")
        case 1 where s[0] == "readyz": (route, expected) = (.ready, "GET")
        case 1 where s[0] == "openapi.json": (route, expected) = (.openAPI, "GET")
        case 1 where s[0] == "metrics": (route, expected) = (.metrics, "GET")
        case 1 where s[0] == "dashboard": (route, expected) = (.dashboard, "GET")
        case 4 where s[0] == "v1" && s[1] == "apps" && s[3] == "nonces": (route, expected) = (.issueNonce(bundleId: s[2]), "POST")
        case 4 where s[0] == "v1" && s[1] == "apps" && s[3] == "verify": (route, expected) = (.verify(bundleId: s[2]), "POST")
        case 4 where s[0] == "v1" && s[1] == "apps" && s[3] == "comparisons": (route, expected) = (.comparisons(bundleId: s[2]), "GET")
        case 4 where s[0] == "v1" && s[1] == "apps" && s[3] == "cutover-impact":
            (route, expected) = (.cutoverImpact(bundleId: s[2]), "GET")
        case 3 where s[0] == "v1" && s[1] == "notifications": (route, expected) = (.notification(bundleId: s[2]), "POST")
        case 6 where s[0] == "v1" && s[1] == "apps" && s[3] == "accounts" && s[5] == "entitlements":
            (route, expected) = (.entitlements(bundleId: s[2], account: s[4]), "GET")
        case 6 where s[0] == "v1" && s[1] == "apps" && s[3] == "accounts" && s[5] == "history":
            (route, expected) = (.history(bundleId: s[2], account: s[4]), "GET")
        default: return .notFound
        }
        return method == expected ? route : .methodNotAllowed(allowed: expected)
    }
}
