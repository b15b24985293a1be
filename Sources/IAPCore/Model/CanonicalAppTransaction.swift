/// Facts about the app purchase itself, the same whichever generation they came from: the legacy
/// `receipt` object of a `verifyReceipt` response, or a StoreKit 2 / Server API `AppTransaction`.
///
/// Dates in integer milliseconds since 1970. Fields a source does not carry are `nil`, never guessed.
public struct CanonicalAppTransaction: Codable, Hashable, Sendable {
    public var bundleId: String
    public var appAppleId: Int64?
    /// `Production`, `Sandbox`, `Xcode`, ... (legacy `ProductionSandbox` is mapped to `Sandbox`;
    /// legacy-only values such as `ProductionVPP` are kept raw).
    public var receiptType: AppStoreEnvironment?
    public var applicationVersion: String?
    public var originalApplicationVersion: String?
    public var versionExternalIdentifier: Int64?
    public var receiptCreationDate: Int64?
    public var originalPurchaseDate: Int64?
    public var preorderDate: Int64?
    /// When Apple answered the request (legacy `verifyReceipt` only).
    public var requestDate: Int64?
    /// Volume Purchase Program receipts only (legacy only).
    public var expirationDate: Int64?
    public var deviceVerification: String?
    public var deviceVerificationNonce: String?
    public var appTransactionId: String?
    /// verifyReceipt's `download_id` (legacy only; Apple: "a unique identifier for the app download
    /// transaction"): what binds a receipt's grandfathering to one account. The receipt's signed
    /// PKCS#7 payload has no such field, so only Apple's live answer states it.
    public var downloadId: Int64?
    public var originalPlatform: String?
    public var environment: AppStoreEnvironment?
    /// Which adapter produced this record ("verifyReceipt", "serverAPI").
    public var source: String
    /// The mapping file that produced it, e.g. "verifyReceipt/v1".
    public var mappingVersion: String

    public init(bundleId: String, source: String, mappingVersion: String) {
        self.bundleId = bundleId
        self.source = source
        self.mappingVersion = mappingVersion
    }
}
