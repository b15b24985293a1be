import IAPCore

/// The `externalPurchaseToken` object of an EXTERNAL_PURCHASE_TOKEN notification.
public struct ExternalPurchaseToken: Sendable, Hashable, Decodable {
    public let externalPurchaseId: String?
    public let tokenCreationDate: Int64?
    public let appAppleId: Int64?
    public let bundleId: String?

    /// Apple marks sandbox tokens by the id's prefix; the object has no environment field. Without
    /// an id there is no environment (never a default to Production): the verifier refuses it.
    public var environment: AppStoreEnvironment? {
        guard let externalPurchaseId else { return nil }
        return externalPurchaseId.hasPrefix("SANDBOX") ? .sandbox : .production
    }
}
