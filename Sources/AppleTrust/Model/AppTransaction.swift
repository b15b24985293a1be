import IAPCore

/// A verified app transaction (StoreKit 2 `AppTransaction`), Apple's field names, plus `raw`.
/// `receiptType` is its environment; `receiptCreationDate` is when it was signed.
public struct AppTransaction: Sendable, Hashable, Decodable {
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
    public private(set) var raw: JSONValue = .null

    /// The members typed here, read in this order (a refusal names the first bad one); not `raw`,
    /// the document itself.
    private enum CodingKeys: String, CodingKey {
        case receiptType, appAppleId, bundleId, applicationVersion, versionExternalIdentifier, receiptCreationDate, originalPurchaseDate,
             originalApplicationVersion, deviceVerification, deviceVerificationNonce, preorderDate, appTransactionId, originalPlatform
    }

    public init(_ raw: JSONValue) throws(VerificationError) {
        self = try PayloadDecoding.decode(raw, context: "appTransaction")
        self.raw = raw
    }
}
