import IAPCore

/// The `data` object of a V2 notification (and, same shape, `appData`). The inner JWS strings are
/// kept here as received; their verified decodings live on `ResponseBodyV2DecodedPayload`.
public struct NotificationData: Sendable, Hashable {
    public let appAppleId: Int64?
    public let bundleId: String?
    public let bundleVersion: String?
    public let environment: AppStoreEnvironment?
    public let signedTransactionInfo: String?
    public let signedRenewalInfo: String?
    public let signedAppTransactionInfo: String?
    public let status: Int64?
    public let consumptionRequestReason: String?

    public init(_ f: JSONFields) throws(VerificationError) {
        appAppleId = try f.int64("appAppleId")
        bundleId = try f.string("bundleId")
        bundleVersion = try f.string("bundleVersion")
        environment = try f.open("environment")
        signedTransactionInfo = try f.string("signedTransactionInfo")
        signedRenewalInfo = try f.string("signedRenewalInfo")
        signedAppTransactionInfo = try f.string("signedAppTransactionInfo")
        status = try f.int64("status")
        consumptionRequestReason = try f.string("consumptionRequestReason")
    }
}
