import IAPCore

/// A verified signed transaction (`JWSTransaction`), Apple's field names. `raw` is the whole
/// verified payload, for mapping and output; fields Apple adds later live there until typed here.
public struct JWSTransactionDecodedPayload: Sendable, Hashable {
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
    public let raw: JSONValue

    public init(_ raw: JSONValue) throws(VerificationError) {
        let f = try JSONFields(raw, context: "transaction")
        transactionId = try f.requiredString("transactionId")
        originalTransactionId = try f.string("originalTransactionId")
        webOrderLineItemId = try f.string("webOrderLineItemId")
        bundleId = try f.string("bundleId")
        productId = try f.string("productId")
        subscriptionGroupIdentifier = try f.string("subscriptionGroupIdentifier")
        purchaseDate = try f.date("purchaseDate")
        originalPurchaseDate = try f.date("originalPurchaseDate")
        expiresDate = try f.date("expiresDate")
        quantity = try f.int64("quantity")
        type = try f.open("type")
        appAccountToken = try f.string("appAccountToken")
        inAppOwnershipType = try f.open("inAppOwnershipType")
        signedDate = try f.requiredDate("signedDate")
        revocationReason = try f.open("revocationReason")
        revocationDate = try f.date("revocationDate")
        isUpgraded = try f.bool("isUpgraded")
        offerType = try f.open("offerType")
        offerIdentifier = try f.string("offerIdentifier")
        environment = try f.open("environment")
        storefront = try f.string("storefront")
        storefrontId = try f.string("storefrontId")
        transactionReason = try f.open("transactionReason")
        currency = try f.string("currency")
        price = try f.int64("price")
        offerDiscountType = try f.open("offerDiscountType")
        appTransactionId = try f.string("appTransactionId")
        offerPeriod = try f.string("offerPeriod")
        revocationType = try f.open("revocationType")
        revocationPercentage = try f.int64("revocationPercentage")
        billingPlanType = try f.open("billingPlanType")
        commitmentInfo = try f.fields("commitmentInfo")?.object
        advancedCommerceInfo = try f.fields("advancedCommerceInfo")?.object
        self.raw = raw
    }
}
