import Adapters
import AppleTrust
import Foundation
import HTTPServer
import IAPCore
import Ledger
import UpstreamHTTP

/// The gateway's HTTP API as a plain async function from request to response: no sockets here, so
/// every route is testable in-process, and `iapgw serve` only puts `HTTPServer` in front of it.
/// It routes, authenticates and turns refusals into JSON errors; each route's work is its endpoint's.
public final class GatewayService: Sendable {
    public let apps: [String: AppPolicy]
    /// The parts the gateway was built from, for the components that run beside it (background
    /// work, reconciliation, batch comparison, the CLI).
    let adapters: AdapterRegistry
    /// Reconciliation reads it too (chains near expiry, stored receipts): a declared need, not a cast.
    let ledger: any Ledger & NotificationLedger & ReconciliationLedger
    let notifications: NotificationDecoder?
    let sealer: AESGCMSealer?
    let logger: Logger
    let now: @Sendable () -> Int64
    /// Shadow, compare and cutover routing of receipts; nil: receipts take the primary path only.
    let migration: MigrationRouter?
    /// Where the comparison routes read from; nil: they answer 404.
    let comparisons: (any ComparisonLedger)?
    /// Shared with the upstream HTTP client (as its observer) when the assembly builds both.
    public let metrics: GatewayMetrics
    /// All the upstream work one request does (every call, attempt and retry wait) ends within this.
    let upstreamBudget: Duration

    let authenticator: APIKeyAuthenticator
    let readiness: ReadinessEndpoint
    let prometheus: MetricsEndpoint
    /// The OpenAPI document, its verify request built from the registered adapters' evidence forms.
    let openAPI: String
    let nonces: NoncesEndpoint
    let verification: VerifyEndpoint
    let entitlements: EntitlementsEndpoint
    let notificationInbox: NotificationsEndpoint

    public init(apps: [String: AppPolicy], adapters: AdapterRegistry, ledger: any Ledger & NotificationLedger & ReconciliationLedger,
                notifications: NotificationDecoder? = nil,
                checks: [any PurchaseCheck] = .standard, receiptSealer: AESGCMSealer?,
                environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger = .disabled,
                now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) },
                migration: MigrationRouter? = nil, comparisons: (any ComparisonLedger)? = nil,
                metrics: GatewayMetrics = GatewayMetrics(), upstreamBudget: Duration = .seconds(20),
                jwsVerifiers: AppVerifiers? = nil) {
        self.metrics = metrics
        self.upstreamBudget = upstreamBudget
        self.migration = migration
        self.comparisons = comparisons
        self.apps = apps
        self.adapters = adapters
        self.ledger = ledger
        self.notifications = notifications
        self.sealer = receiptSealer
        self.logger = logger
        self.now = now
        authenticator = APIKeyAuthenticator(environment: environment)
        readiness = ReadinessEndpoint(apps: apps, ledger: ledger, environment: environment, logger: logger)
        // One verifier and chain cache per app, shared by the Server API adapter and notifications.
        let chainCaches: [MetricsEndpoint.ChainCacheCounts] = jwsVerifiers.map { verifiers in [{ verifiers.chainCacheCounts }] } ?? []
        prometheus = MetricsEndpoint(metrics: metrics, ledger: ledger, comparisons: comparisons,
                                     bundleIds: apps.keys.sorted(), chainCaches: chainCaches)
        nonces = NoncesEndpoint(ledger: ledger, now: now)
        openAPI = OpenAPIDocument.json(evidence: adapters.evidenceForms)
        verification = VerifyEndpoint(adapters: adapters, ledger: ledger, checks: checks, migration: migration,
                                      sealer: receiptSealer, metrics: metrics, logger: logger, now: now)
        entitlements = EntitlementsEndpoint(ledger: ledger, now: now)
        notificationInbox = NotificationsEndpoint(apps: apps, decoder: notifications, legacy: adapters.capability((any ReceiptReverifying).self),
                                                  ledger: ledger, metrics: metrics, logger: logger, now: now)
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

    private func dispatch(_ route: Route, _ request: HTTPRequest) async throws(VerificationError) -> HTTPResponse {
        switch route {
        case .health:
            return .json(200, #"{"status":"ok"}"#)
        case .ready:
            return try await readiness.answer()
        case .openAPI:
            return .json(200, openAPI)
        case .metrics:
            return await prometheus.answer()
        case .dashboard:
            // The app comes from the query (the page has one URL for every app); its own key opens it.
            let app = try authorizedApp(try DashboardEndpoint.bundleId(request), request)
            return try await DashboardEndpoint.answer(request, app: app, ledger: try comparisonLedger())
        case .issueNonce(let bundleId):
            return try await nonces.answer(request, app: try authorizedApp(bundleId, request))
        case .verify(let bundleId):
            return try await verification.answer(request, app: try authorizedApp(bundleId, request))
        case .entitlements(let bundleId, let account):
            return try await entitlements.answer(app: try authorizedApp(bundleId, request), account: account)
        case .history(let bundleId, let account):
            return try await HistoryEndpoint.answer(request, app: try authorizedApp(bundleId, request), account: account,
                                                    ledger: ledger, now: now())
        case .comparisons(let bundleId):
            let app = try authorizedApp(bundleId, request)
            return try await ComparisonsEndpoint.answer(request, app: app, ledger: try comparisonLedger())
        case .cutoverImpact(let bundleId):
            let app = try authorizedApp(bundleId, request)
            return try await CutoverImpactEndpoint.answer(request, app: app, ledger: try comparisonLedger())
        case .notification(let bundleId):
            return try await notificationInbox.answer(request, bundleId: bundleId)
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
        guard let app = apps[bundleId] else { throw VerificationError(.unknownApp, "no app \(bundleId.prefix(200)) is configured") }
        try authenticator.authenticate(request, app: app)
        return app
    }

    private func comparisonLedger() throws(VerificationError) -> any ComparisonLedger {
        guard let comparisons else { throw VerificationError(.notFound, "comparisons are not enabled") }
        return comparisons
    }
}
