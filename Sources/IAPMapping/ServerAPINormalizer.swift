import IAPCore

/// Normalises decoded App Store Server API payloads (the JSON inside a verified JWS) with a mapping
/// file of source "serverAPI": `JWSTransactionDecodedPayload`, `JWSRenewalInfoDecodedPayload`,
/// `AppTransaction`. Types are strict: a date sent as a string is INVALID_FIELD_TYPE.
public struct ServerAPINormalizer: Sendable {
    public static let source = "serverAPI"
    public let mapping: MappingFile
    private let transaction: CompiledKind
    private let renewalInfo: CompiledKind
    private let appTransaction: CompiledKind

    public init(_ mapping: MappingFile) throws(VerificationError) {
        guard mapping.source == Self.source else {
            throw VerificationError(.invalidMapping, "\(mapping.file): source \(mapping.source) is not \(Self.source)")
        }
        self.mapping = mapping
        transaction = try mapping.requireKind("transaction", target: .transaction)
        renewalInfo = try mapping.requireKind("renewalInfo", target: .renewal)
        appTransaction = try mapping.requireKind("appTransaction", target: .appTransaction)
    }

    public func normalize(transaction json: JSONValue) throws(VerificationError) -> CanonicalTransaction {
        try normalizeReporting(transaction: json).record
    }

    public func normalize(renewalInfo json: JSONValue) throws(VerificationError) -> CanonicalRenewal {
        try normalizeReporting(renewalInfo: json).record
    }

    public func normalize(appTransaction json: JSONValue) throws(VerificationError) -> CanonicalAppTransaction {
        try normalizeReporting(appTransaction: json).record
    }

    public func normalizeReporting(transaction json: JSONValue) throws(VerificationError) -> Mapped<CanonicalTransaction> {
        var unmapped: Set<String> = []
        let record = try mapping.transaction(transaction, try mapping.object(json, "transaction"),
                                             path: "transaction", unmapped: &unmapped)
        return Mapped(record: record, unmappedFields: unmapped.sorted())
    }

    public func normalizeReporting(renewalInfo json: JSONValue) throws(VerificationError) -> Mapped<CanonicalRenewal> {
        var unmapped: Set<String> = []
        let record = try mapping.renewal(renewalInfo, try mapping.object(json, "renewalInfo"),
                                         path: "renewalInfo", unmapped: &unmapped)
        return Mapped(record: record, unmappedFields: unmapped.sorted())
    }

    public func normalizeReporting(appTransaction json: JSONValue) throws(VerificationError) -> Mapped<CanonicalAppTransaction> {
        var unmapped: Set<String> = []
        let slots = try appTransaction.apply(try mapping.object(json, "appTransaction"), path: "appTransaction",
                                             unmapped: &unmapped)
        return Mapped(record: mapping.appTransaction(appTransaction, slots: slots), unmappedFields: unmapped.sorted())
    }
}
