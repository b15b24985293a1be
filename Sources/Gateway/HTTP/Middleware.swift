import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// What the steps of one request have learnt so far, handed down the chain: the route the path
/// matched, then the app its `{bundleId}` (or `?app=`) names, then the request's `Idempotency-Key`.
/// A step adds what it owns; the endpoint reads it, so no endpoint repeats a step's work.
struct RequestContext: Sendable {
    let match: Route.Match
    /// The app the route's `AppLookup` found; nil before it ran, and on routes that name no app.
    var app: AppPolicy?
    /// The write the route's `IdempotencyKeys` step opened; nil: the request sent no key.
    var idempotency: IdempotentWrite?

    var parameters: Route.Parameters {
        if case .route(_, let parameters) = match { return parameters }
        return [:]
    }

    /// The app the lookup found; a route that reads it without the lookup in its chain is a fault
    /// of its declaration, refused as one rather than served for no app.
    func requiredApp() throws(VerificationError) -> AppPolicy {
        guard let app else { throw VerificationError(.internalError, "route \(match.name) reads an app it never looked up") }
        return app
    }
}

/// The rest of the chain after a step.
typealias Responder = (HTTPRequest, RequestContext) async throws(VerificationError) -> HTTPResponse

/// One cross-cutting step of every request (as Hummingbird's `RouterMiddleware`): it may look at
/// or change the request and its context, answer itself (a refusal is thrown), or call `next` and
/// look at or change its answer. Each step owns one job; `MiddlewareChain` puts them in order.
protocol Middleware: Sendable {
    func handle(_ request: HTTPRequest, context: RequestContext, next: Responder) async throws(VerificationError) -> HTTPResponse
}

/// Steps run in order, the first outermost, around `endpoint`.
struct MiddlewareChain: Sendable {
    let steps: [any Middleware]

    init(_ steps: [any Middleware]) { self.steps = steps }

    func run(_ request: HTTPRequest, context: RequestContext,
             endpoint: Responder) async throws(VerificationError) -> HTTPResponse {
        try await run(from: steps.startIndex, request, context, endpoint)
    }

    private func run(from index: Int, _ request: HTTPRequest, _ context: RequestContext,
                     _ endpoint: Responder) async throws(VerificationError) -> HTTPResponse {
        guard index < steps.endIndex else { return try await endpoint(request, context) }
        return try await steps[index].handle(request, context: context) { (request, context) throws(VerificationError) in
            try await run(from: index + 1, request, context, endpoint)
        }
    }
}

extension Result where Failure == VerificationError {
    /// `body`'s answer or refusal as a value: for steps that run the rest of the chain inside an
    /// API that takes only a non-throwing body (a task-local's scope, the upstream deadline).
    static func of(_ body: () async throws(VerificationError) -> Success) async -> Self {
        do throws(VerificationError) { return .success(try await body()) } catch { return .failure(error) }
    }
}
