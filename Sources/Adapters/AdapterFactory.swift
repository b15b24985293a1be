import Foundation
import IAPConfig
import IAPCore
import IAPMapping
import UpstreamHTTP

/// What the gateway's assembly hands every adapter factory: the configuration and the parts the
/// adapters share (one upstream client, one retry budget, one verifier per app), built once.
public struct AdapterParts: Sendable {
    public var gateway: GatewayConfig
    /// Every app policy, by bundle id order: what a factory prepares at load time (trust roots read).
    public var apps: [AppPolicy]
    public var mappings: MappingSet
    public var upstream: UpstreamHTTPClient
    public var retryPolicy: RetryPolicy
    /// The process environment: secret references resolve in it.
    public var environment: [String: String]
    /// The per-app JWS verifiers, shared with everything else Apple signs about an app.
    public var verifiers: AppVerifiers
    public var logger: Logger

    public init(gateway: GatewayConfig, apps: [AppPolicy], mappings: MappingSet, upstream: UpstreamHTTPClient,
                retryPolicy: RetryPolicy, environment: [String: String], verifiers: AppVerifiers, logger: Logger) {
        self.gateway = gateway
        self.apps = apps
        self.mappings = mappings
        self.upstream = upstream
        self.retryPolicy = retryPolicy
        self.environment = environment
        self.verifiers = verifiers
        self.logger = logger
    }

    /// The newest mapping file of `source`, or INVALID_MAPPING naming what the adapter lacks.
    public func latestMapping(source: String, for adapter: AdapterID) throws(VerificationError) -> MappingFile {
        guard let file = mappings.latest(source: source) else {
            throw VerificationError(.invalidMapping, "the \(adapter) adapter needs a \(source) mapping file")
        }
        return file
    }
}

/// How the gateway gets one adapter: its id and the kinds of evidence it verifies are known before
/// it is built (an app file's routing is checked against them when the configuration is read), and
/// `make` builds it from the assembly's shared parts. The production list of factories is the one
/// place that names concrete adapters.
public protocol AdapterFactory: Sendable {
    var id: AdapterID { get }
    /// The kinds `make`'s adapter declares in its evidence forms (the registry refuses one that differs).
    var evidenceKinds: [AppPolicy.EvidenceKind] { get }
    func make(_ parts: AdapterParts) throws(VerificationError) -> any VerificationAdapter
}

extension AdapterRegistry {
    /// Every factory's adapter, registered in order; a factory whose adapter is not what it declared
    /// (another id, other kinds of evidence) stops the start.
    public init(factories: [any AdapterFactory], parts: AdapterParts) throws(VerificationError) {
        self.init()
        for factory in factories {
            let adapter = try factory.make(parts)
            guard adapter.id == factory.id, Set(adapter.evidenceForms.map(\.kind)) == Set(factory.evidenceKinds) else {
                throw VerificationError(.invalidConfiguration,
                                        "the \(factory.id) factory made an adapter unlike the one it declares")
            }
            guard self.adapter(adapter.id) == nil else {
                throw VerificationError(.invalidConfiguration, "two adapters are registered as \(adapter.id)")
            }
            register(adapter)
        }
    }
}

extension AdapterCatalog {
    /// The adapters `factories` make, as an app file's routing may name them.
    public init(factories: [any AdapterFactory]) {
        self.init(factories.map { ($0.id, $0.evidenceKinds) })
    }
}
