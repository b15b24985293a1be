/// The side-by-side verdict on one purchase evidence verified by both generations, matched by
/// `transactionId`. The `legacy` side is the generation migrated from and the `serverAPI` side the one
/// migrated to, whichever adapters an app's routing compares (`RoutingMode.generations`: verifyReceipt
/// and the App Store Server API under the presets); each side's mapping version names its source.
public struct PurchaseComparison: Codable, Hashable, Sendable {
    public var id: String
    public var bundleId: String
    /// When the comparison was made (ms).
    public var comparedAt: Int64
    /// The kind of evidence compared (`AppPolicy.EvidenceKind`: "receipt", or any kind routing compares).
    public var evidenceKind: String
    /// SHA-256 of the evidence (never the evidence).
    public var evidenceSHA256: String
    public var legacyMappingVersion: String?
    public var serverAPIMappingVersion: String?
    /// Transactions compared (present in at least one path).
    public var transactionCount: Int
    public var differences: [ComparisonDifference]
    /// A path that failed outright (its error code), so nothing of it could be compared.
    public var legacyError: String?
    public var serverAPIError: String?
    /// Every product either path named (sorted), so comparisons can be filtered by product even
    /// when they agreed.
    public var productIds: [String]
    /// The account the evidence was presented for (nil when unknown, as in a batch without accounts).
    public var account: String? = nil
    /// The App Store environment the answering paths named ("Production", "Sandbox"); nil when both failed.
    public var environment: String? = nil
    /// The app version the receipt names (`application_version`), when it carries one.
    public var appVersion: String? = nil
    /// One entry per purchase chain either path answered with: what each path would grant.
    public var purchases: [ComparedPurchase] = []

    public init(id: String, bundleId: String, comparedAt: Int64, evidenceKind: String, evidenceSHA256: String,
                legacyMappingVersion: String?, serverAPIMappingVersion: String?, transactionCount: Int,
                differences: [ComparisonDifference], legacyError: String? = nil, serverAPIError: String? = nil, productIds: [String] = []) {
        self.productIds = productIds
        self.id = id
        self.bundleId = bundleId
        self.comparedAt = comparedAt
        self.evidenceKind = evidenceKind
        self.evidenceSHA256 = evidenceSHA256
        self.legacyMappingVersion = legacyMappingVersion
        self.serverAPIMappingVersion = serverAPIMappingVersion
        self.transactionCount = transactionCount
        self.differences = differences
        self.legacyError = legacyError
        self.serverAPIError = serverAPIError
    }

    /// Both paths answered and nothing unexplained differs.
    public var agreed: Bool { differences.isEmpty && legacyError == nil && serverAPIError == nil }
}

/// One unexplained disagreement. Known, declared differences (a field one generation does not
/// carry, marked `knownDifference` in the mapping files) never become one of these.
public struct ComparisonDifference: Codable, Hashable, Sendable {
    public enum Kind: String, Codable, Sendable, CaseIterable {
        /// The transaction is in one path's answer only.
        case onlyInLegacy, onlyInServerAPI
        /// A canonical field differs (field, both values).
        case fieldMismatch
        /// The derived entitlement state differs (e.g. refunded in one path, active in the other).
        case entitlementMismatch
        /// `expiresDate` differs.
        case expiryMismatch
    }
    public var kind: Kind
    public var transactionId: String
    public var productId: String?
    /// The canonical field, for field, entitlement and expiry mismatches.
    public var field: String?
    /// Both values as canonical JSON text (nil: absent in that path).
    public var legacyValue: String?
    public var serverAPIValue: String?

    public init(kind: Kind, transactionId: String, productId: String?, field: String?,
                legacyValue: String?, serverAPIValue: String?) {
        self.kind = kind
        self.transactionId = transactionId
        self.productId = productId
        self.field = field
        self.legacyValue = legacyValue
        self.serverAPIValue = serverAPIValue
    }
}

/// One purchase chain (`originalTransactionId`) of a comparison: the entitlement each path derives
/// from its own answer, so readiness can count chains and a cutover's impact can be read without
/// re-verifying anything.
public struct ComparedPurchase: Codable, Hashable, Sendable {
    public var originalTransactionId: String
    public var productId: String
    /// Apple's product type (`TransactionType` raw value), from the transaction or the catalog.
    public var productType: String?
    /// The state each path derives; nil when the chain is not in that path's answer (or the path failed).
    public var legacyState: Entitlement.State?
    public var legacyExpiresDate: Int64?
    public var serverAPIState: Entitlement.State?
    public var serverAPIExpiresDate: Int64?
    /// Both paths answered and no unexplained difference is on this chain.
    public var agreed: Bool

    public init(originalTransactionId: String, productId: String, productType: String?, legacyState: Entitlement.State?,
                legacyExpiresDate: Int64?, serverAPIState: Entitlement.State?, serverAPIExpiresDate: Int64?, agreed: Bool) {
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.productType = productType
        self.legacyState = legacyState
        self.legacyExpiresDate = legacyExpiresDate
        self.serverAPIState = serverAPIState
        self.serverAPIExpiresDate = serverAPIExpiresDate
        self.agreed = agreed
    }
}
