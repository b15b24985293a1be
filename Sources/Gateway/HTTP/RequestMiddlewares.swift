import Foundation
import HTTPServer
import IAPCore
import UpstreamHTTP

/// Every log line of the request, from any component, carries its id.
struct RequestIdMiddleware: Middleware {
    func handle(_ request: HTTPRequest, context: RequestContext, next: Responder) async throws(VerificationError) -> HTTPResponse {
        try await Logger.$requestId.withValue(request.requestId) {
            await Result.of { () throws(VerificationError) in try await next(request, context) }
        }.get()
    }
}

/// Every upstream call made for the request (each attempt and retry wait) ends within its one
/// budget; work moved off the request, in detached tasks, does not inherit it.
struct RequestBudgetMiddleware: Middleware {
    let budget: Duration

    /// What a route that asks Apple answers when Apple cannot serve it (`OpenAPIOperation.callsApple`).
    static let refusals = [
        OpenAPIRefusal(status: "502", description: "Apple refused the gateway's credentials (UPSTREAM_CREDENTIALS_REJECTED) or answered in a shape the gateway cannot use (UPSTREAM_INVALID_RESPONSE)"),
        OpenAPIRefusal(status: "503", description: "Apple unavailable, or its Retry-After beyond the request's budget (UPSTREAM_UNAVAILABLE, RATE_LIMITED); see Retry-After (Apple's own when it sent one)",
                       headers: ["Retry-After"]),
    ]

    func handle(_ request: HTTPRequest, context: RequestContext, next: Responder) async throws(VerificationError) -> HTTPResponse {
        try await UpstreamDeadline.within(budget) {
            await Result.of { () throws(VerificationError) in try await next(request, context) }
        }.get()
    }
}

/// Counts every answer, refusals included, by route and status, and times it. Outside the error
/// envelope, so it sees the status the client gets.
struct MetricsMiddleware: Middleware {
    let metrics: GatewayMetrics

    func handle(_ request: HTTPRequest, context: RequestContext, next: Responder) async throws(VerificationError) -> HTTPResponse {
        let started = DispatchTime.now().uptimeNanoseconds
        let answer = await Result.of { () throws(VerificationError) in try await next(request, context) }
        let status = switch answer {
        case .success(let response): response.status
        case .failure(let error): ErrorResponses.status(for: error.code)
        }
        metrics.record(route: context.match.name, status: status, micros: (DispatchTime.now().uptimeNanoseconds - started) / 1000)
        return try answer.get()
    }
}

/// Turns every refusal below it into its JSON error (`ErrorResponses`) with the request id, and
/// logs it: nothing above it sees a thrown error.
struct ErrorEnvelopeMiddleware: Middleware {
    let logger: Logger

    func handle(_ request: HTTPRequest, context: RequestContext, next: Responder) async throws(VerificationError) -> HTTPResponse {
        do throws(VerificationError) {
            return try await next(request, context)
        } catch {
            let response = ErrorResponses.response(error, requestId: request.requestId)
            // A refused client is routine (info); a gateway that cannot serve anyone (bad config, Apple
            // refusing our credentials, storage down) must reach an operator's alerting.
            let level: Logger.Level = response.status >= 500 ? (response.status == 503 ? .warning : .error) : .info
            var fields = ["route": context.match.name, "code": error.code.rawValue, "status": String(response.status)]
            // The client got a plain sentence for a 5xx; what really happened is for the operator.
            if response.status >= 500 { fields["detail"] = error.message }
            logger.log(level, "request_refused", fields)
            return response
        }
    }
}

/// Where the shared steps end: the matched route's own steps (app lookup, key, `Idempotency-Key`)
/// around its endpoint; a path no route has is NOT_FOUND, a method the path does not take is
/// METHOD_NOT_ALLOWED with `Allow`.
/// A class: one reference per request, not a copy of every endpoint.
final class RouteDispatcher: Sendable {
    let endpoints: GatewayEndpoints
    /// Each route's own steps, by route name, built once.
    let routeSteps: [String: MiddlewareChain]

    init(endpoints: GatewayEndpoints, routeSteps: [String: MiddlewareChain]) {
        self.endpoints = endpoints
        self.routeSteps = routeSteps
    }

    func respond(_ request: HTTPRequest, context: RequestContext) async throws(VerificationError) -> HTTPResponse {
        switch context.match {
        case .route(let route, _):
            return try await routeSteps[route.name, default: MiddlewareChain([])].run(request, context: context) {
                (request, context) throws(VerificationError) in try await route.respond(self.endpoints, request, context)
            }
        case .methodNotAllowed(let allowed):
            var response = ErrorResponses.response(VerificationError(.methodNotAllowed, "this path takes \(allowed) only"),
                                                   requestId: request.requestId)
            response.headers.append(("Allow", allowed))
            return response
        case .notFound:
            throw VerificationError(.notFound, "no such route")
        }
    }
}
