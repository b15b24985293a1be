import IAPCore

/// Verified subscription renewal info (`JWSRenewalInfo`), Apple's field names, plus `raw`.
/// Apple's renewal info carries no bundleId (nor appAppleId): on its own it cannot show which app
/// it is for. The verifier enforces either field when present; bind renewal info to a verified
/// transaction of the app (same `originalTransactionId`) before trusting it.
public struct JWSRenewalInfoDecodedPayload: Sendable, Hashable, Decodable {
    public let originalTransactionId: String
    public let autoRenewStatus: AutoRenewStatus
    public let expirationIntent: ExpirationIntent?
    public let autoRenewProductId: String?
    public let productId: String?
    public let isInBillingRetryPeriod: Bool?
    public let priceIncreaseStatus: PriceIncreaseStatus?
    public let gracePeriodExpiresDate: Int64?
    public let offerType: OfferType?
    public let offerIdentifier: String?
    public let signedDate: Int64
    public let environment: AppStoreEnvironment?
    public let recentSubscriptionStartDate: Int64?
    public let renewalDate: Int64?
    public let currency: String?
    public let renewalPrice: Int64?
    public let offerDiscountType: OfferDiscountType?
    public let appAccountToken: String?
    public let appTransactionId: String?
    public let offerPeriod: String?
    public let eligibleWinBackOfferIds: [String]?
    public let renewalBillingPlanType: BillingPlanType?
    /// `RenewalCommitmentInfo`, kept as Apple sent it.
    public let commitmentInfo: [String: JSONValue]?
    /// `AdvancedCommerceRenewalInfo`, kept whole.
    public let advancedCommerceInfo: [String: JSONValue]?
    public private(set) var raw: JSONValue = .null

    /// The members typed here, read in this order (a refusal names the first bad one); not `raw`,
    /// the document itself.
    private enum CodingKeys: String, CodingKey {
        case originalTransactionId, autoRenewStatus, expirationIntent, autoRenewProductId, productId, isInBillingRetryPeriod,
             priceIncreaseStatus, gracePeriodExpiresDate, offerType, offerIdentifier, signedDate, environment, recentSubscriptionStartDate,
             renewalDate, currency, renewalPrice, offerDiscountType, appAccountToken, appTransactionId, offerPeriod,
             eligibleWinBackOfferIds, renewalBillingPlanType, commitmentInfo, advancedCommerceInfo
    }

    public init(_ raw: JSONValue) throws(VerificationError) {
        self = try PayloadDecoding.decode(raw, context: "renewalInfo")
        self.raw = raw
    }
}
