import IAPConfig
import IAPCore
import IAPMapping

extension LegacyReceiptAdapter {
    /// Registers the verifyReceipt adapter (the production list of adapter factories).
    public struct Factory: AdapterFactory {
        public let id = AdapterID.verifyReceipt
        public var evidenceKinds: [AppPolicy.EvidenceKind] { LegacyReceiptAdapter.forms.map(\.kind) }

        public init() {}

        public func make(_ parts: AdapterParts) throws(VerificationError) -> any VerificationAdapter {
            try LegacyReceiptAdapter(upstream: parts.upstream, endpoints: parts.gateway.upstream.verifyReceipt,
                                     mapping: try parts.latestMapping(source: "verifyReceipt", for: id),
                                     retryPolicy: parts.retryPolicy, environmentVariables: parts.environment,
                                     logger: parts.logger)
        }
    }
}
