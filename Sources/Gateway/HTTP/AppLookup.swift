import HTTPServer
import IAPConfig
import IAPCore

/// The app a request names (its `{bundleId}`, or the dashboard's `?app=`), found once for the
/// route's later steps and its endpoint: UNKNOWN_APP (404) before anything else is judged, so an
/// unauthenticated request to an app that is not configured learns only that.
struct AppLookup: Middleware {
    let apps: [String: AppPolicy]
    /// Where the route's request names its app.
    let bundleId: Route.AppName

    func handle(_ request: HTTPRequest, context: RequestContext, next: Responder) async throws(VerificationError) -> HTTPResponse {
        var context = context
        context.app = try apps.app(try bundleId(request, context.parameters))
        return try await next(request, context)
    }

    static let refusals = [OpenAPIRefusal(status: "404", description: "unknown app (UNKNOWN_APP)")]
}

/// The route's app must be called with that app's API key (`APIKeyAuthenticator`).
extension APIKeyAuthenticator: Middleware {
    func handle(_ request: HTTPRequest, context: RequestContext, next: Responder) async throws(VerificationError) -> HTTPResponse {
        try authenticate(request, app: try context.requiredApp())
        return try await next(request, context)
    }

    static let refusals = [
        OpenAPIRefusal(status: "401", description: "missing or wrong API key (UNAUTHENTICATED); WWW-Authenticate: Bearer",
                       headers: ["WWW-Authenticate"]),
    ]
}

extension [String: AppPolicy] {
    /// The app's policy, or UNKNOWN_APP: the one lookup of an app a request, an operator or a
    /// stored row names.
    func app(_ bundleId: String) throws(VerificationError) -> AppPolicy {
        guard let app = self[bundleId] else { throw VerificationError.unknownApp(bundleId) }
        return app
    }
}
