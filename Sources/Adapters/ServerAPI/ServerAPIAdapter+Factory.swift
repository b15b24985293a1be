import IAPConfig
import IAPCore
import IAPMapping

extension ServerAPIAdapter {
    /// Registers the App Store Server API adapter (the production list of adapter factories), on the
    /// verifiers the gateway shares with notifications; every app's context is prepared at once.
    public struct Factory: AdapterFactory {
        public let id = AdapterID.serverAPI
        public var evidenceKinds: [AppPolicy.EvidenceKind] { ServerAPIAdapter.forms.map(\.kind) }

        public init() {}

        public func make(_ parts: AdapterParts) throws(VerificationError) -> any VerificationAdapter {
            var options = ServerAPIAdapter.Options()
            options.retryPolicy = parts.retryPolicy
            options.secretEnvironment = parts.environment
            options.verifiers = parts.verifiers
            let adapter = ServerAPIAdapter(upstream: parts.upstream, baseURLs: parts.gateway.upstream.serverAPI,
                                           normalizer: try ServerAPINormalizer(try parts.latestMapping(source: "serverAPI", for: id)),
                                           options: options, logger: parts.logger)
            // Trust-root files are read here, with the rest of the start (off the pool), never by a request.
            adapter.prepare(parts.apps)
            return adapter
        }
    }
}
