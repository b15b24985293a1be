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
/// Every request runs one chain of small steps (`Middleware`): its request id, its upstream budget,
/// its metrics and its error envelope, then its route's own steps (app lookup, key, `Idempotency-Key`)
/// and its endpoint. Each step owns its one job; each route's work is its endpoint's.
public final class GatewayService: Sendable {
    public let apps: [String: AppPolicy]
    /// Its shadow work is drained at shutdown.
    let migration: MigrationRouter?
    public let metrics: GatewayMetrics

    /// The steps every request takes, outermost first, around `dispatcher`.
    let chain: MiddlewareChain
    let dispatcher: RouteDispatcher

    /// The router of the gateway `parts` make up, each endpoint handed the parts it uses.
    public init(_ parts: GatewayParts) {
        let (apps, ledger, logger, now) = (parts.apps, parts.ledger, parts.logger, parts.now)
        self.apps = apps
        self.migration = parts.migration
        self.metrics = parts.metrics
        let authenticator = APIKeyAuthenticator(environment: parts.environment)
        let idempotency = IdempotencyKeys(ledger: ledger, retentionHours: parts.idempotencyKeyHours, now: now)
        let chainCaches: [MetricsEndpoint.ChainCacheCounts] = parts.jwsVerifiers.map { verifiers in [{ verifiers.chainCacheCounts }] } ?? []
        let offerSigners = OfferSigners(environment: parts.environment)
        let readiness = ReadinessEndpoint(apps: apps, ledger: ledger, environment: parts.environment, logger: logger)
        let endpoints = GatewayEndpoints(
            readiness: readiness,
            metrics: MetricsEndpoint(metrics: parts.metrics, ledger: ledger, comparisons: parts.comparisons,
                                     bundleIds: apps.keys.sorted(),
                                     rolloutApps: apps.values.filter { $0.routing.rollout != nil }.map(\.bundleId).sorted(),
                                     chainCaches: chainCaches, logWriter: logger.writer, expiryGauges: parts.expiryGauges,
                                     readiness: readiness),
            openAPI: OpenAPIDocument.json(evidence: parts.adapters.evidenceForms),
            nonces: NoncesEndpoint(ledger: ledger, now: now),
            verify: VerifyEndpoint(adapters: parts.adapters, ledger: ledger, checks: parts.checks, migration: parts.migration,
                                   sealer: parts.sealer, metrics: parts.metrics, logger: logger, now: now),
            entitlements: EntitlementsEndpoint(ledger: ledger, now: now),
            offerSignatures: OfferSignaturesEndpoint(ledger: ledger, signers: offerSigners, now: now),
            history: HistoryEndpoint(ledger: ledger, now: now),
            orders: parts.orderLookup(),
            notifications: NotificationsEndpoint(decoder: parts.notifications,
                                                 legacy: parts.adapters.capability((any ReceiptReverifying).self),
                                                 ledger: ledger, metrics: parts.metrics, logger: logger, now: now),
            retention: RetentionEndpoint(ledger: ledger, signers: offerSigners,
                                         verifiers: parts.jwsVerifiers ?? parts.notifications?.verifiers ?? AppVerifiers(),
                                         logger: logger, now: now),
            comparisons: parts.comparisons,
            rollouts: parts.rolloutController)
        chain = MiddlewareChain([RequestIdMiddleware(), RequestBudgetMiddleware(budget: parts.upstreamBudget),
                                 MetricsMiddleware(metrics: parts.metrics), ErrorEnvelopeMiddleware(logger: logger)])
        let routeSteps = Route.all.map { route in
            (route.name, MiddlewareChain(route.steps(apps: apps, authenticator: authenticator, idempotency: idempotency)))
        }
        dispatcher = RouteDispatcher(endpoints: endpoints, routeSteps: Dictionary(uniqueKeysWithValues: routeSteps))
    }

    /// For shutdown, once the server takes no more requests: waits for the shadow comparisons
    /// already taken (new ones are dropped), so none is lost half-done.
    public func finishShadowWork() async {
        await migration?.shadowWork.drain()
    }

    /// The one entry point: every request through the chain, every refusal answered as its JSON error.
    public func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let context = RequestContext(match: Route.match(method: request.method, segments: request.pathSegments))
        let dispatcher = dispatcher
        let answer = await Result.of { () throws(VerificationError) in
            try await chain.run(request, context: context) { (request, context) throws(VerificationError) in
                try await dispatcher.respond(request, context: context)
            }
        }
        // The envelope answers every refusal below it; one thrown above it still gets its JSON error.
        switch answer {
        case .success(let response): return response
        case .failure(let error): return ErrorResponses.response(error, requestId: request.requestId)
        }
    }
}
