import IAPCore

/// A verified signed transaction (`JWSTransaction`), Apple's field names. `raw` is the whole
/// verified payload, for mapping and output; fields Apple adds later live there until typed here.
public struct JWSTransactionDecodedPayload: Sendable, Hashable, Decodable {
    public let transactionId: String
    public let originalTransactionId: String?
    public let webOrderLineItemId: String?
    public let bundleId: String?
    public let productId: String?
    public let subscriptionGroupIdentifier: String?
    public let purchaseDate: Int64?
    public let originalPurchaseDate: Int64?
    public let expiresDate: Int64?
    public let quantity: Int64?
    public let type: TransactionType?
    public let appAccountToken: String?
    public let inAppOwnershipType: InAppOwnershipType?
    public let signedDate: Int64
    public let revocationReason: RevocationReason?
    public let revocationDate: Int64?
    public let isUpgraded: Bool?
    public let offerType: OfferType?
    public let offerIdentifier: String?
    public let environment: AppStoreEnvironment?
    public let storefront: String?
    public let storefrontId: String?
    public let transactionReason: TransactionReason?
    public let currency: String?
    public let price: Int64?
    public let offerDiscountType: OfferDiscountType?
    public let appTransactionId: String?
    public let offerPeriod: String?
    public let revocationType: RevocationType?
    /// Milliunits of a whole: 100000 is a full refund.
    public let revocationPercentage: Int64?
    public let billingPlanType: BillingPlanType?
    /// `TransactionCommitmentInfo`, kept as Apple sent it (its members are typed by the mapping's consumers).
    public let commitmentInfo: [String: JSONValue]?
    /// `AdvancedCommerceTransactionInfo`, kept whole.
    public let advancedCommerceInfo: [String: JSONValue]?
    public private(set) var raw: JSONValue = .null

    /// The members typed here, read in this order (a refusal names the first bad one); not `raw`,
    /// the document itself.
    private enum CodingKeys: String, CodingKey {
        case transactionId, originalTransactionId, webOrderLineItemId, bundleId, productId, subscriptionGroupIdentifier, purchaseDate,
             originalPurchaseDate, expiresDate, quantity, type, appAccountToken, inAppOwnershipType, signedDate, revocationReason,
             revocationDate, isUpgraded, offerType, offerIdentifier, environment, storefront, storefrontId, transactionReason, currency,
             price, offerDiscountType, appTransactionId, offerPeriod, revocationType, revocationPercentage, billingPlanType, commitmentInfo,
             advancedCommerceInfo
    }

    public init(_ raw: JSONValue) throws(VerificationError) {
        self = try PayloadDecoding.decode(raw, context: "transaction")
        self.raw = raw
    }
}
