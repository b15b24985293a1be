import Adapters
import AppleTrust
import Foundation
import HTTPServer
import IAPConfig
import IAPCore
import Ledger
import UpstreamHTTP

/// The gateway's HTTP API as a plain async function from request to response: no sockets here, so
/// every route is testable in-process, and `iapgw serve` only puts `HTTPServer` in front of it.
/// It routes, authenticates and turns refusals into JSON errors; each route's work is its endpoint's.
public final class GatewayService: Sendable {
    public let apps: [String: AppPolicy]
    let logger: Logger
    /// Its shadow work is drained at shutdown.
    let migration: MigrationRouter?
    public let metrics: GatewayMetrics
    /// All the upstream work one request does (every call, attempt and retry wait) ends within this.
    let upstreamBudget: Duration

    let authenticator: APIKeyAuthenticator
    let endpoints: GatewayEndpoints

    /// The router of the gateway `parts` make up, each endpoint handed the parts it uses.
    public init(_ parts: GatewayParts) {
        let (apps, ledger, logger, now) = (parts.apps, parts.ledger, parts.logger, parts.now)
        self.apps = apps
        self.logger = logger
        self.migration = parts.migration
        self.metrics = parts.metrics
        self.upstreamBudget = parts.upstreamBudget
        authenticator = APIKeyAuthenticator(environment: parts.environment)
        let chainCaches: [MetricsEndpoint.ChainCacheCounts] = parts.jwsVerifiers.map { verifiers in [{ verifiers.chainCacheCounts }] } ?? []
        let offerSigners = OfferSigners(environment: parts.environment)
        let readiness = ReadinessEndpoint(apps: apps, ledger: ledger, environment: parts.environment, logger: logger)
        endpoints = GatewayEndpoints(
            readiness: readiness,
            metrics: MetricsEndpoint(metrics: parts.metrics, ledger: ledger, comparisons: parts.comparisons,
                                     bundleIds: apps.keys.sorted(),
                                     rolloutApps: apps.values.filter { $0.routing.rollout != nil }.map(\.bundleId).sorted(),
                                     chainCaches: chainCaches, logWriter: logger.writer, expiryGauges: parts.expiryGauges,
                                     readiness: readiness),
            openAPI: OpenAPIDocument.json(evidence: parts.adapters.evidenceForms),
            idempotency: IdempotencyKeys(ledger: ledger, retentionHours: parts.idempotencyKeyHours, now: now),
            nonces: NoncesEndpoint(ledger: ledger, now: now),
            verify: VerifyEndpoint(adapters: parts.adapters, ledger: ledger, checks: parts.checks, migration: parts.migration,
                                   sealer: parts.sealer, metrics: parts.metrics, logger: logger, now: now),
            entitlements: EntitlementsEndpoint(ledger: ledger, now: now),
            offerSignatures: OfferSignaturesEndpoint(ledger: ledger, signers: offerSigners, now: now),
            history: HistoryEndpoint(ledger: ledger, now: now),
            orders: parts.orderLookup(),
            notifications: NotificationsEndpoint(apps: apps, decoder: parts.notifications,
                                                 legacy: parts.adapters.capability((any ReceiptReverifying).self),
                                                 ledger: ledger, metrics: parts.metrics, logger: logger, now: now),
            retention: RetentionEndpoint(apps: apps, ledger: ledger, signers: offerSigners,
                                         verifiers: parts.jwsVerifiers ?? parts.notifications?.verifiers ?? AppVerifiers(),
                                         logger: logger, now: now),
            comparisons: parts.comparisons,
            rollouts: (ledger as? any RolloutController.Store).map { RolloutController(ledger: $0, logger: logger, now: now) })
    }

    /// For shutdown, once the server takes no more requests: waits for the shadow comparisons
    /// already taken (new ones are dropped), so none is lost half-done.
    public func finishShadowWork() async {
        await migration?.shadowWork.drain()
    }

    /// The one entry point: route, authenticate, run, and turn every refusal into its JSON error.
    public func handle(_ request: HTTPRequest) async -> HTTPResponse {
        // Every log line of this request, from any component, carries its id; every upstream call made
        // for it ends within its one budget (work moved off the request, in detached tasks, does not).
        await Logger.$requestId.withValue(request.requestId) {
            await UpstreamDeadline.within(upstreamBudget) { await handleWithinRequest(request) }
        }
    }

    private func handleWithinRequest(_ request: HTTPRequest) async -> HTTPResponse {
        let log = logger
        let started = DispatchTime.now().uptimeNanoseconds
        let route = Route.match(method: request.method, segments: request.pathSegments)
        var response: HTTPResponse
        do {
            response = try await dispatch(route, request)
        } catch {
            response = ErrorResponses.response(error, requestId: request.requestId)
            // A refused client is routine (info); a gateway that cannot serve anyone (bad config, Apple
            // refusing our credentials, storage down) must reach an operator's alerting.
            let level: Logger.Level = response.status >= 500 ? (response.status == 503 ? .warning : .error) : .info
            var fields = ["route": route.name, "code": error.code.rawValue, "status": String(response.status)]
            // The client got a plain sentence for a 5xx; what really happened is for the operator.
            if response.status >= 500 { fields["detail"] = error.message }
            log.log(level, "request_refused", fields)
        }
        metrics.record(route: route.name, status: response.status,
                       micros: (DispatchTime.now().uptimeNanoseconds - started) / 1000)
        return response
    }

    private func dispatch(_ match: Route.Match, _ request: HTTPRequest) async throws(VerificationError) -> HTTPResponse {
        switch match {
        case .route(let route, let parameters):
            switch route.handler {
            case .open(let handle):
                return try await handle(endpoints, request, parameters)
            case .app(let app, let handle):
                return try await handle(endpoints, request, try authorizedApp(try app(request, parameters), request), parameters)
            case .keyed(let handle):
                let app = try authorizedApp(try Route.pathApp(request, parameters), request)
                return try await endpoints.idempotency.answer(request, app: app, route: route.name) { (key) throws(VerificationError) in
                    try await handle(endpoints, request, app, key)
                }
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

    private func authorizedApp(_ bundleId: String, _ request: HTTPRequest) throws(VerificationError) -> AppPolicy {
        guard let app = apps[bundleId] else { throw VerificationError.unknownApp(bundleId) }
        try authenticator.authenticate(request, app: app)
        return app
    }
}
