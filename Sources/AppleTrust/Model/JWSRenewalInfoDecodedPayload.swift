import IAPCore

/// Verified subscription renewal info (`JWSRenewalInfo`), Apple's field names, plus `raw`.
/// Apple's renewal info carries no bundleId (nor appAppleId): on its own it cannot show which app
/// it is for. The verifier enforces either field when present; bind renewal info to a verified
/// transaction of the app (same `originalTransactionId`) before trusting it.
public struct JWSRenewalInfoDecodedPayload: Sendable, Hashable {
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
    public let raw: JSONValue

    public init(_ raw: JSONValue) throws(VerificationError) {
        let f = try JSONFields(raw, context: "renewalInfo")
        originalTransactionId = try f.requiredString("originalTransactionId")
        guard let status: AutoRenewStatus = try f.open("autoRenewStatus") else {
            throw VerificationError(.missingField, "renewalInfo.autoRenewStatus is required")
        }
        autoRenewStatus = status
        expirationIntent = try f.open("expirationIntent")
        autoRenewProductId = try f.string("autoRenewProductId")
        productId = try f.string("productId")
        isInBillingRetryPeriod = try f.bool("isInBillingRetryPeriod")
        priceIncreaseStatus = try f.open("priceIncreaseStatus")
        gracePeriodExpiresDate = try f.date("gracePeriodExpiresDate")
        offerType = try f.open("offerType")
        offerIdentifier = try f.string("offerIdentifier")
        signedDate = try f.requiredDate("signedDate")
        environment = try f.open("environment")
        recentSubscriptionStartDate = try f.date("recentSubscriptionStartDate")
        renewalDate = try f.date("renewalDate")
        currency = try f.string("currency")
        renewalPrice = try f.int64("renewalPrice")
        offerDiscountType = try f.open("offerDiscountType")
        appAccountToken = try f.string("appAccountToken")
        appTransactionId = try f.string("appTransactionId")
        offerPeriod = try f.string("offerPeriod")
        eligibleWinBackOfferIds = try f.array("eligibleWinBackOfferIds").map { (ids) throws(VerificationError) in
            try ids.map { (id) throws(VerificationError) in
                guard case .string(let s) = id else {
                    throw VerificationError(.invalidFieldType, "renewalInfo.eligibleWinBackOfferIds must be an array of strings")
                }
                return s
            }
        }
        renewalBillingPlanType = try f.open("renewalBillingPlanType")
        commitmentInfo = try f.fields("commitmentInfo")?.object
        advancedCommerceInfo = try f.fields("advancedCommerceInfo")?.object
        self.raw = raw
    }
}
