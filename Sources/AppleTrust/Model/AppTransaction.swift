import IAPCore

/// A verified app transaction (StoreKit 2 `AppTransaction`), Apple's field names, plus `raw`.
/// `receiptType` is its environment; `receiptCreationDate` is when it was signed.
public struct AppTransaction: Sendable, Hashable {
    public let receiptType: AppStoreEnvironment
    public let appAppleId: Int64?
    /// Apple always states it; read as optional so that one without it is refused as every other
    /// evidence without a bundle is (`AppIdentity.check`), not as a decoding fault.
    public let bundleId: String?
    public let applicationVersion: String?
    public let versionExternalIdentifier: Int64?
    public let receiptCreationDate: Int64
    public let originalPurchaseDate: Int64?
    public let originalApplicationVersion: String?
    public let deviceVerification: String?
    public let deviceVerificationNonce: String?
    public let preorderDate: Int64?
    public let appTransactionId: String?
    public let originalPlatform: String?
    public let raw: JSONValue

    public init(_ raw: JSONValue) throws(VerificationError) {
        let f = try JSONFields(raw, context: "appTransaction")
        receiptType = try f.requiredOpen("receiptType")
        appAppleId = try f.int64("appAppleId")
        bundleId = try f.string("bundleId")
        applicationVersion = try f.string("applicationVersion")
        versionExternalIdentifier = try f.int64("versionExternalIdentifier")
        receiptCreationDate = try f.requiredDate("receiptCreationDate")
        originalPurchaseDate = try f.date("originalPurchaseDate")
        originalApplicationVersion = try f.string("originalApplicationVersion")
        deviceVerification = try f.string("deviceVerification")
        deviceVerificationNonce = try f.string("deviceVerificationNonce")
        preorderDate = try f.date("preorderDate")
        appTransactionId = try f.string("appTransactionId")
        originalPlatform = try f.string("originalPlatform")
        self.raw = raw
    }
}
