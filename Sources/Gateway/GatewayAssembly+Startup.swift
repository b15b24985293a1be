import Adapters
import Foundation
import HTTPServer
import IAPConfig
import IAPCore

extension GatewayAssembly {
    /// How long a start may take to read its files and open (and migrate) the ledger's database:
    /// long enough for a schema migration, short enough that a frozen database ends the start.
    public static let startupDeadline: Duration = .seconds(120)

    /// Runs a start's blocking work (configuration and key files read, the ledger's database opened,
    /// the listening socket bound) on a thread of its own, never on Swift's cooperative pool, and
    /// answers within `deadline`: past it the start fails STORAGE_UNAVAILABLE even while the
    /// work is still stuck.
    public static func offPool<R: Sendable>(deadline: Duration = startupDeadline,
                                            _ body: @escaping @Sendable () throws(VerificationError) -> R)
        async throws(VerificationError) -> R {
        let executor = BlockingExecutor(purpose: "startup", unavailable: .storageUnavailable,
                                        limits: .init(threads: 1, queueCapacity: 1, deadline: deadline))
        return try await executor.run(body)
    }

    /// The configuration in `configDirectory`, its routing read against `adapters`, and the parts
    /// built from it (`makeParts`), off the pool.
    public static func open(configDirectory: URL, mappingsDirectory: URL,
                            environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger,
                            adapters: [any AdapterFactory] = productionAdapters)
        async throws(VerificationError) -> (GatewayAssembly, GatewayParts) {
        try await offPool { () throws(VerificationError) -> (GatewayAssembly, GatewayParts) in
            let configuration = try ConfigLoader.loadAll(configDirectory: configDirectory, adapters: catalog(adapters))
            let assembly = GatewayAssembly(configuration: configuration, mappingsDirectory: mappingsDirectory,
                                           environment: environment, logger: logger, adapters: adapters)
            return (assembly, try assembly.makeParts())
        }
    }

    /// The gateway made of `parts`, serving: its server made and started (the TLS files read, the
    /// socket bound) and its background work started (the instance lock taken), off the pool.
    public func start(_ parts: GatewayParts) async throws
        -> (service: GatewayService, server: HTTPServer, background: Task<Void, Never>) {
        let assembly = self
        let service = GatewayService(parts)
        let started = try await Self.offPool { () -> Result<HTTPServer, any Error> in
            Result {
                let server = try assembly.makeServer(service: service)
                try server.start()
                return server
            }
        }
        let server = try started.get()
        let background = try await Self.offPool { () throws(VerificationError) in try assembly.startBackgroundWork(parts) }
        return (service, server, background)
    }
}
