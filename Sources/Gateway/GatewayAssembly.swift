import Adapters
import AppleTrust
import Foundation
import HTTPServer
import IAPConfig
import IAPCore
import IAPMapping
import Ledger
import UpstreamHTTP

/// Builds a running gateway from its configuration and its adapter factories (`productionAdapters`
/// unless a caller adds its own), found by id and by capability from then on.
public struct GatewayAssembly: Sendable {
    public var configuration: ConfigLoader.Configuration
    public var mappingsDirectory: URL
    public var environment: [String: String]
    public var logger: Logger
    public var adapterFactories: [any AdapterFactory]

    public init(configuration: ConfigLoader.Configuration, mappingsDirectory: URL,
                environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger,
                adapters: [any AdapterFactory] = GatewayAssembly.productionAdapters) {
        self.configuration = configuration
        self.mappingsDirectory = mappingsDirectory
        self.environment = environment
        self.logger = logger
        self.adapterFactories = adapters
    }

    /// What an app file's routing may name in a gateway of these adapters.
    public static func catalog(_ adapters: [any AdapterFactory] = productionAdapters) -> AdapterCatalog {
        AdapterCatalog(factories: adapters)
    }

    /// The router of the gateway `makeParts` builds.
    public func makeService() throws(VerificationError) -> GatewayService {
        GatewayService(try makeParts())
    }

    /// Everything a gateway is made of, built and checked once; the router, the background work and
    /// the CLI's one-off components are each made from it.
    public func makeParts() throws(VerificationError) -> GatewayParts {
        let gateway = configuration.gateway
        let apps = configuration.apps.values.sorted { $0.bundleId < $1.bundleId }
        // Refuse to start on a policy that could verify nothing (a missing trust root); secrets that
        // are not readable now are logged, since they may be mounted later.
        for app in apps {
            for diagnostic in app.diagnostics(environment: environment) {
                if diagnostic.severity == .error {
                    throw VerificationError(.invalidConfiguration, "\(app.bundleId): \(diagnostic.message)")
                }
                logger.warning("config_warning", ["bundleId": app.bundleId, "message": diagnostic.message])
            }
        }
        // Read now, then refreshed by a thread of their own: requests never wait for a secret's disk.
        SecretFiles.shared.load(apps.flatMap(\.secretFiles), logger: logger)
        let mappings = try MappingSet.load(directory: mappingsDirectory)
        let metrics = GatewayMetrics()
        let upstream: UpstreamHTTPClient
        do {
            upstream = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(
                connectTimeout: .seconds(gateway.timeouts.connectSeconds),
                requestTimeout: .seconds(gateway.timeouts.requestSeconds)), observer: metrics)
        } catch {
            throw VerificationError(.invalidConfiguration, "upstream HTTP client: \(error)")
        }
        let budget = Duration.seconds(gateway.timeouts.budgetSeconds)
        // One verifier and chain cache per app, for the adapters and notifications alike; the
        // trust-root files are read here, with the rest of the start (off the pool), never by a request.
        let jwsVerifiers = AppVerifiers(maxJWSBytes: Int(gateway.limits.maxJWSBytes))
        jwsVerifiers.prepare(apps)
        let registry = try AdapterRegistry(factories: adapterFactories, parts: AdapterParts(
            gateway: gateway, apps: apps, mappings: mappings, upstream: upstream, retryPolicy: RetryPolicy(budget: budget),
            environment: environment, verifiers: jwsVerifiers, logger: logger))
        try Self.checkRouting(apps, against: registry)
        // A write whose COMMIT is on its way when the storage deadline passes is answered by that
        // commit, within what is left of the request's budget.
        let storageDeadline = Duration.seconds(gateway.timeouts.storageSeconds)
        let ledger = try AsyncSQLLedger(storage: gateway.storage.url, deadline: storageDeadline,
                                        commitWait: max(.seconds(1), budget - storageDeadline),
                                        webhookAudience: Self.webhookAudience(configuration.apps), logger: logger)
        // Known differences are declared by each source's newest mapping file, whichever adapters compare.
        var migration = MigrationRouter(comparator: PurchaseComparator(mappingFiles: mappings.sources.compactMap(mappings.latest)),
                                        store: ledger, logger: logger,
                                        onShadowDropped: { metrics.recordLostWrite("shadow_comparison") })
        migration.rollouts = RolloutRouting(ledger: ledger, logger: logger)
        return GatewayParts(apps: configuration.apps, adapters: registry, ledger: ledger,
                            notifications: NotificationDecoder(signed: registry.capability((any SignedNotificationDecoding).self),
                                                               environment: environment, verifiers: jwsVerifiers),
                            sealer: try ReceiptSealKey.load(environment: environment, configured: gateway.receiptSealKey,
                                                            storage: gateway.storage, logger: logger),
                            environment: environment, logger: logger, migration: migration, comparisons: ledger,
                            metrics: metrics, upstreamBudget: budget, jwsVerifiers: jwsVerifiers,
                            idempotencyKeyHours: try gateway.background.overridden(by: environment).idempotencyKeyHours,
                            expiryGauges: ExpiryGauges.text(apps: configuration.apps, tlsCertificateFile: gateway.tls?.certificateFile))
    }

    /// Every app's routing names registered adapters that verify what they are routed (what the
    /// configuration was read against, checked again here for policies built in code).
    static func checkRouting(_ apps: [AppPolicy], against registry: AdapterRegistry) throws(VerificationError) {
        let catalog = AdapterCatalog(registry.ids.map { id in (id, registry.adapter(id)!.evidenceForms.map(\.kind)) })
        for app in apps {
            for (kind, mode) in app.routing.modes.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                if let problem = catalog.problem(routing: kind, to: mode) {
                    throw VerificationError(.invalidConfiguration, "\(app.bundleId): routing.\(kind): \(problem)")
                }
            }
        }
    }

    /// The apps whose webhook events are stored: those with a receiver (`AppPolicy.webhook`).
    public static func webhookAudience(_ apps: [String: AppPolicy]) -> WebhookAudience {
        .apps(apps.filter { $0.value.webhook != nil }.keys)
    }

    /// The background work of a running gateway: the inbox drained through the state machine, the
    /// webhook outbox delivered, reconciliation, the sweep of entitlements the clock ends, and the
    /// finish outbox (Finish Transaction) drained.
    /// Cancel the returned task to stop them all.
    public func startBackgroundWork(_ parts: GatewayParts) throws(VerificationError) -> Task<Void, Never> {
        let gateway = configuration.gateway
        let processor = NotificationProcessor(apps: parts.apps, ledger: parts.ledger, logger: logger, now: parts.now)
        let client: UpstreamHTTPClient
        do {
            client = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(
                connectTimeout: .seconds(gateway.timeouts.connectSeconds),
                requestTimeout: .seconds(gateway.timeouts.requestSeconds),
                maxConnectionsPerHost: max(8, Int(gateway.webhooks.concurrency))))
        } catch {
            throw VerificationError(.invalidConfiguration, "webhook HTTP client: \(error)")
        }
        let (identity, instanceLock) = workerIdentity()
        let dispatcher = WebhookDispatcher(apps: parts.apps, ledger: parts.ledger, client: client,
                                           environment: environment, logger: logger, identity: identity,
                                           leaseMillis: gateway.webhooks.leaseSeconds * 1000,
                                           concurrency: Int(gateway.webhooks.concurrency), now: parts.now)
        let settings = try configuration.gateway.background.overridden(by: environment)
        // Each component is handed what it uses, here, from the parts the gateway is made of.
        let maintenance = ReconciliationSchedule(reconciler: try parts.reconciler(identity: identity, logger: logger),
                                                 ledger: parts.ledger, settings: settings, logger: logger, now: parts.now)
        let sweep = EntitlementSweep(ledger: parts.ledger, settings: settings, logger: logger, now: parts.now)
        let finisher = (parts.ledger as? any FinishLedger).map {
            TransactionFinisher(apps: parts.apps, ledger: $0, finishing: parts.adapters.capability((any TransactionFinishing).self),
                                identity: identity, leaseMillis: gateway.webhooks.leaseSeconds * 1000, logger: logger,
                                now: parts.now)
        }
        let rollouts = parts.rolloutController.map { RolloutGuardSchedule(apps: parts.apps, controller: $0, logger: logger) }
        return Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await processor.run() }
                group.addTask { await dispatcher.run() }
                group.addTask { await maintenance.run() }
                group.addTask { await sweep.run() }
                if let finisher { group.addTask { await finisher.run() } }
                if let rollouts { group.addTask { await rollouts.run() } }
            }
            // Held until the dispatcher has stopped: then another instance may be "the" one.
            withExtendedLifetime(instanceLock) {}
        }
    }

    /// Who this instance is to the background work's leases: the configured `instanceId`; else, on
    /// SQLite, "the instance of this file" while it holds the file's instance lock; else a new one at
    /// each start (its leases are only ever taken back by running out).
    func workerIdentity() -> (WorkerIdentity, InstanceLock?) {
        if let id = configuration.gateway.instanceId { return (.init(id: id, isStable: true), nil) }
        guard case .sqlite(let path) = configuration.gateway.storage else { return (.ephemeral(), nil) }
        guard let lock = InstanceLock(path: path + "-instance.lock") else {
            logger.warning("sqlite_shared_by_another_instance", ["reason": "its instance lock is held by another process"])
            return (.ephemeral(), nil)
        }
        return (.init(id: "sqlite", isStable: true), lock)
    }

    public func makeServer(service: GatewayService) throws -> HTTPServer {
        let gateway = configuration.gateway
        // A client has 10 s to send a whole request (slowloris), independent of upstream timeouts.
        let http = HTTPServerConfiguration(host: gateway.listenAddress, port: gateway.listenPort,
                                           maxBodyBytes: Int(gateway.limits.maxBodyBytes), connectionTimeoutSeconds: 10,
                                           maxConnections: Int(gateway.limits.maxConnections),
                                           perIPConnectionLimit: Int(gateway.limits.maxConnectionsPerClient),
                                           tls: try gateway.tls.map(Self.loadTLS))
        return try HTTPServer(configuration: http) { request in await service.handle(request) }
    }

    /// The `tls` section's files, checked now: a bad one stops the start (`iapgw config check` runs this too).
    public static func loadTLS(_ tls: GatewayConfig.TLS) throws(VerificationError) -> HTTPServerTLS {
        let minimum: HTTPServerTLS.MinimumVersion = switch tls.minimumVersion {
        case .tls12: .tls12
        case .tls13: .tls13
        }
        do {
            return try HTTPServerTLS.load(certificateFile: tls.certificateFile.path, privateKeyFile: tls.privateKeyFile.path,
                                          minimumVersion: minimum)
        } catch {
            throw VerificationError(.invalidConfiguration, error.message)
        }
    }
}

/// The key that seals stored receipts: `IAPGW_RECEIPT_SEAL_KEY` (64 hex digits) when set, else the
/// gateway config's `receiptSealKey` (a secret reference to the same), else a random key kept beside
/// the SQLite database (mode 0600), made on first start. With PostgreSQL one of the first two is
/// required: every instance must read the receipts the others sealed.
public enum ReceiptSealKey {
    public static func load(environment: [String: String], configured: SecretReference? = nil, storage: LedgerStorage,
                            logger: Logger) throws(VerificationError) -> AESGCMSealer {
        let given: (hex: String, name: String)? = if let hex = environment["IAPGW_RECEIPT_SEAL_KEY"] {
            (hex, "IAPGW_RECEIPT_SEAL_KEY")
        } else if let configured {
            (try configured.resolve(environment: environment), "receiptSealKey (\(configured))")
        } else {
            nil
        }
        if let given {
            guard let key = Hex.bytes(given.hex), key.count == 32 else {
                throw VerificationError(.invalidConfiguration, "\(given.name) must be 64 hex digits")
            }
            return try AESGCMSealer(key: key)
        }
        // Instances sharing a database must share the key too, and have no common directory for it.
        guard case .sqlite(let path) = storage else {
            throw VerificationError(.invalidConfiguration,
                                    "receiptSealKey or IAPGW_RECEIPT_SEAL_KEY (64 hex digits) is required with a PostgreSQL storageURL")
        }
        let keyFile = URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent("receipt-seal.key")
        if let data = FileManager.default.contents(atPath: keyFile.path) {
            guard data.count == 32 else {
                throw VerificationError(.invalidConfiguration, "\(keyFile.path) is not a 32-byte key")
            }
            return try AESGCMSealer(key: Array(data))
        }
        var key = [UInt8](repeating: 0, count: 32)
        var generator = SystemRandomNumberGenerator()
        for i in 0..<32 { key[i] = UInt8.random(in: 0...255, using: &generator) }
        do {
            try FileManager.default.createDirectory(at: keyFile.deletingLastPathComponent(), withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: keyFile.path, contents: Data(key),
                                                 attributes: [.posixPermissions: 0o600]) else {
                throw VerificationError(.storageUnavailable, "cannot write \(keyFile.path)")
            }
        } catch let error as VerificationError {
            throw error
        } catch {
            throw VerificationError(.storageUnavailable, "cannot create \(keyFile.deletingLastPathComponent().path)")
        }
        logger.info("receipt_seal_key_created", ["path": keyFile.path])
        return try AESGCMSealer(key: key)
    }
}
