import Adapters
import AppleTrust
import Foundation
import IAPConfig
import IAPCore
import Ledger

/// What a gateway is built from (`GatewayAssembly.makeParts`). The router (`GatewayService`) and
/// each component beside it (background work, reconciliation, batch comparison, the CLI's operator
/// actions) are made here from exactly the parts they use; none of them holds the router.
public struct GatewayParts: Sendable {
    var apps: [String: AppPolicy]
    var adapters: AdapterRegistry
    /// Reconciliation reads it too (chains near expiry, stored receipts): a declared need, not a cast.
    var ledger: any Ledger & NotificationLedger & ReconciliationLedger
    var notifications: NotificationDecoder?
    var checks: [any PurchaseCheck] = .standard
    var sealer: AESGCMSealer?
    /// The process environment: API keys, offer signing keys and secret references resolve in it.
    var environment: [String: String] = ProcessInfo.processInfo.environment
    var logger: Logger = .disabled
    var now: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }
    /// Shadow, compare and cutover routing of receipts; nil: receipts take the primary path only.
    var migration: MigrationRouter?
    /// Where the comparison routes and the migration report read from; nil: they answer 404.
    var comparisons: (any ComparisonLedger)?
    /// Shared with the upstream HTTP client (as its observer) when the assembly builds both.
    var metrics = GatewayMetrics()
    /// All the upstream work one request does (every call, attempt and retry wait) ends within this.
    var upstreamBudget: Duration = .seconds(20)
    /// One verifier and chain cache per app, shared by the Server API adapter and notifications.
    var jwsVerifiers: AppVerifiers?
    /// How long an answer stored under an `Idempotency-Key` is replayed (`background.idempotencyKeyHours`).
    var idempotencyKeyHours = GatewayConfig.Background().idempotencyKeyHours
    /// `/metrics`' expiry dates (`ExpiryGauges`), read with the files they are about.
    var expiryGauges = ""
}

extension GatewayParts {
    /// The app's policy, or UNKNOWN_APP: what every per-app action checks first.
    func app(_ bundleId: String) throws(VerificationError) -> AppPolicy { try apps.app(bundleId) }

    /// The reconciler of this gateway; `apps` overrides its policies (tests, a single-app CLI run).
    public func reconciler(apps: [String: AppPolicy]? = nil, options: Reconciler.Options = Reconciler.Options(),
                           identity: WorkerIdentity = .ephemeral(), logger: Logger? = nil) throws(VerificationError) -> Reconciler {
        guard let notifications else { throw VerificationError(.invalidConfiguration, "notifications are not enabled") }
        return Reconciler(apps: apps ?? self.apps, ledger: ledger, decoder: notifications,
                          serverAPI: adapters.capability((any ReconciliationSource).self),
                          legacy: adapters.capability((any ReceiptReverifying).self), sealer: sealer, options: options,
                          identity: identity, logger: logger ?? self.logger, now: now)
    }

    /// `iapgw compare`: one app's backlog of receipts through the generations its routing compares.
    public func batchComparer(bundleId: String, options: BatchComparer.Options = BatchComparer.Options())
        throws(VerificationError) -> BatchComparer {
        let app = try app(bundleId)
        guard let migration else {
            throw VerificationError(.invalidConfiguration, "comparisons are not enabled (no comparison ledger)")
        }
        // The generations the app's receipt routing compares, or, where it compares nothing yet, shadow's.
        let receipts = app.routing.receipt.generations ?? AppPolicy.RoutingMode.shadow.generations!
        guard let legacy = adapters.adapter(receipts.from), let serverAPI = adapters.adapter(receipts.to) else {
            throw VerificationError(.invalidConfiguration,
                                    "batch comparison needs both the \(receipts.from) and \(receipts.to) adapters")
        }
        guard (1...256).contains(options.concurrency) else {
            throw VerificationError(.invalidConfiguration, "concurrency must be 1 to 256")
        }
        return BatchComparer(app: app, router: migration, legacy: legacy, serverAPI: serverAPI, options: options, now: now)
    }

    /// The operator's actions on the notification inbox (`iapgw notifications`, `iapgw reconcile`).
    public func notificationMaintenance(apps: [String: AppPolicy]? = nil) -> NotificationMaintenance {
        NotificationMaintenance(apps: apps ?? self.apps, ledger: ledger, logger: logger, now: now)
    }

    /// `iapgw audit`: the history of an account or of the chain holding a transaction, as the route shows it.
    public func audit(bundleId: String, subject: SupportSubject, since: Int64, limit: Int)
        async throws(VerificationError) -> JSONValue {
        try await HistoryEndpoint(ledger: ledger, now: now).audit(app: try app(bundleId), subject: subject, since: since,
                                                                   limit: limit)
    }

    /// `iapgw audit --order-id`: Apple's transactions of an order, their owners and the owners'
    /// histories, as `GET /v1/apps/{bundleId}/orders/{orderId}` shows them.
    public func auditOrder(bundleId: String, orderId: String, since: Int64, limit: Int) async throws(VerificationError) -> JSONValue {
        try await orderLookup().audit(app: try app(bundleId), orderId: orderId, since: since, limit: limit)
    }

    /// The order look-up of this gateway: the adapter that can ask Apple, found by capability.
    func orderLookup() -> OrderLookupEndpoint {
        OrderLookupEndpoint(orders: adapters.capability((any OrderLookingUp).self), ledger: ledger,
                            history: HistoryEndpoint(ledger: ledger, now: now))
    }

    /// The report (verdict, failures, cutover impact) over every stored comparison of the app.
    public func migrationReport(bundleId: String) async throws(VerificationError) -> MigrationReport {
        guard let comparisons else { throw VerificationError(.notFound, "comparisons are not enabled") }
        return try await DashboardEndpoint.report(app: try app(bundleId), ledger: comparisons)
    }
}

extension GatewayParts {
    /// What changes and reads the apps' receipt rollouts (the route, the dashboard, the guard, the
    /// command line); nil when the ledger keeps no rollouts.
    var rolloutController: RolloutController? {
        (ledger as? any RolloutController.Store).map { RolloutController(ledger: $0, logger: logger, now: now) }
    }

    /// `iapgw rollout`: drives an app's receipt rollout by hand, as the gateway's guard does on its
    /// own; prints what `GET /v1/apps/{bundleId}/rollout` answers after the action.
    public func rollout(bundleId: String, action: RolloutAction) async throws(VerificationError) -> JSONValue {
        guard let controller = rolloutController else {
            throw VerificationError(.invalidConfiguration, "rollouts need the gateway's own ledger")
        }
        let app = try app(bundleId)
        switch action {
        case .status: break
        case .advance: _ = try await controller.advance(app)
        case .pause: _ = try await controller.pause(app)
        case .rollback: _ = try await controller.rollback(app)
        }
        return RolloutEndpoint.json(try await controller.status(app), now: now())
    }
}

/// What `iapgw rollout` does.
public enum RolloutAction: String, CaseIterable, Sendable {
    case status, advance, pause, rollback
}
