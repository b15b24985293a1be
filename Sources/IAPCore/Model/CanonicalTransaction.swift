/// One purchase fact, the same whichever generation of Apple evidence it came from.
///
/// Named after the App Store Server API (camelCase), dates in integer milliseconds since 1970,
/// prices in milliunits of `currency`. Fields a source does not carry are `nil`, never guessed.
public struct CanonicalTransaction: Codable, Hashable, Sendable {
    public var transactionId: String
    public var originalTransactionId: String?
    public var webOrderLineItemId: String?
    public var bundleId: String?
    public var appAppleId: Int64?
    public var productId: String
    public var subscriptionGroupIdentifier: String?
    public var type: TransactionType?
    public var purchaseDate: Int64?
    public var originalPurchaseDate: Int64?
    public var expiresDate: Int64?
    public var quantity: Int64?
    public var inAppOwnershipType: InAppOwnershipType?
    public var isUpgraded: Bool?
    public var offerType: OfferType?
    public var offerIdentifier: String?
    public var offerDiscountType: OfferDiscountType?
    public var revocationDate: Int64?
    public var revocationReason: RevocationReason?
    public var environment: AppStoreEnvironment?
    public var appAccountToken: String?
    public var storefront: String?
    public var price: Int64?
    public var currency: String?
    public var transactionReason: TransactionReason?
    public var signedDate: Int64?
    /// The app download this purchase belongs to (API 1.15); the same for every purchase of one install base.
    public var appTransactionId: String?
    /// The offer's duration, ISO 8601 (`P1M`), when `offerType` is set.
    public var offerPeriod: String?
    /// `REFUND_FULL`, `REFUND_PRORATED`, `FAMILY_REVOKE` (unknown values kept) beside `revocationDate`.
    public var revocationType: RevocationType?
    /// A prorated refund's share, in milliunits of a whole (`500` = 0.5 %, `100000` = 100 %).
    public var revocationPercentage: Int64?
    public var billingPlanType: BillingPlanType?
    /// A monthly plan's commitment, as Apple states it (`billingPeriodNumber`, `totalBillingPeriods`,
    /// `commitmentExpiresDate`, `commitmentPrice`, and any member Apple adds).
    public var commitmentInfo: JSONValue?
    /// Advanced Commerce API details, kept whole: the gateway acts on none of them.
    public var advancedCommerceInfo: JSONValue?
    /// Which adapter produced this record ("verifyReceipt", "serverAPI").
    public var source: String
    /// The mapping file that produced it, e.g. "verifyReceipt/v1".
    public var mappingVersion: String

    public init(transactionId: String, productId: String, source: String, mappingVersion: String) {
        self.transactionId = transactionId
        self.productId = productId
        self.source = source
        self.mappingVersion = mappingVersion
    }
}

/// The renewal state of one subscription (`pending_renewal_info` / `JWSRenewalInfoDecodedPayload`).
public struct CanonicalRenewal: Codable, Hashable, Sendable {
    public var originalTransactionId: String
    public var productId: String?
    public var autoRenewProductId: String?
    public var autoRenewStatus: AutoRenewStatus?
    public var expirationIntent: ExpirationIntent?
    public var isInBillingRetryPeriod: Bool?
    public var gracePeriodExpiresDate: Int64?
    public var priceIncreaseStatus: PriceIncreaseStatus?
    public var offerType: OfferType?
    public var offerIdentifier: String?
    public var offerDiscountType: OfferDiscountType?
    public var renewalDate: Int64?
    public var renewalPrice: Int64?
    public var currency: String?
    public var environment: AppStoreEnvironment?
    public var signedDate: Int64?
    public var appTransactionId: String?
    public var appAccountToken: String?
    public var offerPeriod: String?
    /// Win-back offers the subscriber may redeem now (API 1.13).
    public var eligibleWinBackOfferIds: [String]?
    public var renewalBillingPlanType: BillingPlanType?
    /// The commitment's renewal (`commitmentRenewalDate`, `commitmentAutoRenewStatus`, …), as Apple states it.
    public var commitmentInfo: JSONValue?
    public var advancedCommerceInfo: JSONValue?
    public var source: String
    public var mappingVersion: String

    public init(originalTransactionId: String, source: String, mappingVersion: String) {
        self.originalTransactionId = originalTransactionId
        self.source = source
        self.mappingVersion = mappingVersion
    }
}

extension CanonicalTransaction {
    /// When a monthly plan's commitment ends (`commitmentInfo.commitmentExpiresDate`): the monthly
    /// `expiresDate` still decides access; this is the date the subscriber has committed to.
    public var commitmentExpiresDate: Int64? {
        if case .int(let date)? = commitmentInfo?["commitmentExpiresDate"] { date } else { nil }
    }
}

/// What an account may use, derived from canonical facts (never from what the client says). Stored
/// as the facts last said; `EntitlementAccess` says what it is at a given time and whether it grants.
public struct Entitlement: Codable, Hashable, Sendable {
    public enum State: String, Codable, Sendable, CaseIterable {
        case active, gracePeriod, billingRetry, expired, revoked, refunded
        /// A consumable: credited once, for the claim that answers it in `newlyGranted`, and no
        /// lasting access (a pack of coins is not a lifetime unlock). Only a refund moves it (to `refunded`).
        case credited

        /// Apple took the purchase back (a refund, or Family Sharing or a revocation ending it):
        /// what every reader of a stored state asks to know whether a purchase was taken back.
        public var isTakenBack: Bool { self == .refunded || self == .revoked }
    }
    public var account: String
    public var productId: String
    public var state: State
    /// When `state`'s period ends: the subscription's expiry; in grace, the grace period's end.
    public var expiresDate: Int64?
    public var originalTransactionId: String
    public var source: String
    /// A monthly plan with a commitment: when the commitment ends, shown beside the monthly
    /// `expiresDate` (which alone decides access). Stored with the entitlement.
    public var commitmentExpiresDate: Int64?

    public init(account: String, productId: String, state: State, expiresDate: Int64?,
                originalTransactionId: String, source: String, commitmentExpiresDate: Int64? = nil) {
        self.commitmentExpiresDate = commitmentExpiresDate
        self.account = account
        self.productId = productId
        self.state = state
        self.expiresDate = expiresDate
        self.originalTransactionId = originalTransactionId
        self.source = source
    }
}
