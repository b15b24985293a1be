import AppleTrust
import Foundation
import IAPCore

/// An app the simulated App Store knows: what verifyReceipt checks (shared secret) and what the
/// Server API checks (the JWT's issuer, key id and signature, and `bid`).
public struct SimulatedApp: Sendable {
    public var bundleId: String
    public var appAppleId: Int64
    public var sharedSecret: String
    public var issuerId: String
    public var keyId: String
    /// Verifies the Server API bearer tokens (the public half of the app's `.p8` key).
    public var apiPublicKey: ECPublicKey
    public var bundleVersion: String
    /// Where `POST /inApps/v1/notifications/test` and lifecycle notifications go (loopback only).
    public var notificationURL: String?

    public init(bundleId: String, appAppleId: Int64, sharedSecret: String, issuerId: String, keyId: String,
                apiPublicKey: ECPublicKey, bundleVersion: String = "1.0", notificationURL: String? = nil) {
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.sharedSecret = sharedSecret
        self.issuerId = issuerId
        self.keyId = keyId
        self.apiPublicKey = apiPublicKey
        self.bundleVersion = bundleVersion
        self.notificationURL = notificationURL
    }
}

/// The offer a purchase was made with (intro offers, promotional offers, offer codes).
public enum SimulatedOffer: Sendable, Equatable {
    case freeTrial
    case introductory(OfferDiscountType)
    case promotional(id: String, OfferDiscountType)
    case offerCode(refName: String, OfferDiscountType)
}

/// What a customer buys. Defaults describe a one-month USD subscription bought in the US store.
public struct PurchaseRequest: Sendable {
    public var bundleId: String
    public var productId: String
    public var type: TransactionType
    /// The receipt owner ("device"): a receipt carries every purchase of its owner in its app.
    public var owner: String
    public var environment: AppStoreEnvironment
    public var subscriptionGroupIdentifier: String?
    /// Length of one subscription period (auto-renewable and non-renewing).
    public var periodSeconds: Int64
    public var quantity: Int64
    /// Milliunits of `currency` (9990 = 9.99).
    public var price: Int64
    public var currency: String
    public var storefront: String
    public var storefrontId: String
    public var appAccountToken: String?
    public var offer: SimulatedOffer?
    public var familyShared: Bool
    /// nil: now.
    public var purchaseDate: Date?
    /// An auto-renewable subscription billed monthly (`billingPlanType` MONTHLY) within a commitment
    /// of this many periods (`commitmentInfo`); nil: billed up front as before API 1.21.
    public var commitmentPeriods: Int64?

    public init(bundleId: String, productId: String, type: TransactionType, owner: String,
                environment: AppStoreEnvironment = .production, subscriptionGroupIdentifier: String? = nil,
                periodSeconds: Int64 = 30 * 86_400, quantity: Int64 = 1, price: Int64 = 9_990, currency: String = "USD",
                storefront: String = "USA", storefrontId: String = "143441", appAccountToken: String? = nil,
                offer: SimulatedOffer? = nil, familyShared: Bool = false, purchaseDate: Date? = nil) {
        self.bundleId = bundleId
        self.productId = productId
        self.type = type
        self.owner = owner
        self.environment = environment
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
        self.periodSeconds = periodSeconds
        self.quantity = quantity
        self.price = price
        self.currency = currency
        self.storefront = storefront
        self.storefrontId = storefrontId
        self.appAccountToken = appAccountToken
        self.offer = offer
        self.familyShared = familyShared
        self.purchaseDate = purchaseDate
    }
}

/// A monthly plan's commitment (`TransactionCommitmentInfo`): which period of how many, and its end.
struct SimulatedCommitment: Sendable, Equatable {
    var billingPeriodNumber: Int64
    var totalBillingPeriods: Int64
    var commitmentExpiresDate: Int64
    var commitmentPrice: Int64
}

/// What every lifecycle operation returns: the owner's current receipt and the affected
/// transaction, signed as the Server API would return it.
public struct SimulatedPurchase: Sendable {
    public let transactionId: String
    public let originalTransactionId: String
    public let receiptBase64: String
    public let signedTransaction: String
    public let environment: AppStoreEnvironment
    public let bundleId: String
    public let productId: String
    public let orderId: String
}

/// One transaction as the simulated store records it (all dates in ms since 1970).
struct TransactionRecord: Sendable {
    var transactionId: String
    var originalTransactionId: String
    var webOrderLineItemId: String?
    var bundleId: String
    var productId: String
    var subscriptionGroupIdentifier: String?
    var purchaseDate: Int64
    var originalPurchaseDate: Int64
    var expiresDate: Int64?
    var quantity: Int64
    var type: TransactionType
    var appAccountToken: String?
    var ownership: InAppOwnershipType
    var revocationDate: Int64?
    var revocationReason: Int64?
    var revocationType: RevocationType?
    /// Milliunits; only for REFUND_PRORATED.
    var revocationPercentage: Int64?
    var commitment: SimulatedCommitment?
    var isUpgraded: Bool
    var offer: SimulatedOffer?
    var environment: AppStoreEnvironment
    var transactionReason: TransactionReason
    var storefront: String
    var storefrontId: String
    var price: Int64
    var currency: String
    var owner: String
    var appTransactionId: String
    var orderId: String
    /// Order of last change, for history sorting.
    var modifiedSequence: Int64

    /// No revocation, as a renewal starts and a reversed refund leaves it (Apple removes the fields).
    mutating func clearRevocation() {
        revocationDate = nil
        revocationReason = nil
        revocationType = nil
        revocationPercentage = nil
    }

    var offerType: OfferType? {
        switch offer {
        case .freeTrial, .introductory: .introductory
        case .promotional: .promotional
        case .offerCode: .offerCode
        case nil: nil
        }
    }
    var offerIdentifier: String? {
        switch offer {
        case .promotional(let id, _): id
        case .offerCode(let name, _): name
        default: nil
        }
    }
    var offerDiscountType: OfferDiscountType? {
        switch offer {
        case .freeTrial: .freeTrial
        case .introductory(let d), .promotional(_, let d), .offerCode(_, let d): d
        case nil: nil
        }
    }
    var isTrialPeriod: Bool { offer == .freeTrial }
    var isInIntroOfferPeriod: Bool { if case .introductory = offer { true } else { false } }
}

/// The renewal side of one auto-renewable subscription chain.
struct SubscriptionChain: Sendable {
    var originalTransactionId: String
    var bundleId: String
    var owner: String
    var environment: AppStoreEnvironment
    var subscriptionGroupIdentifier: String
    var periodSeconds: Int64
    var autoRenewProductId: String
    var autoRenewStatus: Int64 = 1
    var expirationIntent: Int64?
    var isInBillingRetryPeriod: Bool = false
    var gracePeriodExpiresDate: Int64?
    var price: Int64
    var currency: String
    /// The newest transaction of the chain.
    var latestTransactionId: String
}

/// One sent (or attempted) V2 notification, for the notification history route.
struct NotificationRecord: Sendable {
    var bundleId: String
    var environment: AppStoreEnvironment
    var notificationType: String
    var subtype: String?
    var transactionId: String?
    var originalTransactionId: String?
    var signedPayload: String
    var signedDate: Int64
    var sendAttemptResult: String
}

/// An owner's download of the app itself: the version first installed and when it was bought.
public struct AppPurchase: Sendable, Equatable {
    public var originalApplicationVersion: String
    public var originalPurchaseDate: Int64
}
