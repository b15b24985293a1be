import IAPCore

/// The `data` object of a V2 notification (and, same shape, `appData`). The inner JWS strings are
/// kept here as received; their verified decodings live on `ResponseBodyV2DecodedPayload`.
public struct NotificationData: Sendable, Hashable, Decodable {
    public let appAppleId: Int64?
    public let bundleId: String?
    public let bundleVersion: String?
    public let environment: AppStoreEnvironment?
    public let signedTransactionInfo: String?
    public let signedRenewalInfo: String?
    public let signedAppTransactionInfo: String?
    public let status: Int64?
    public let consumptionRequestReason: String?
}
