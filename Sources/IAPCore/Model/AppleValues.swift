// Apple's enumerations, kept open: a value Apple adds tomorrow decodes today, with its raw value
// intact, instead of failing the whole payload. (Apple's own library keeps `rawType` beside `type`;
// an open struct with named constants gives the same guarantee with one property.)

/// A string-valued Apple enumeration that keeps unknown raw values.
public protocol OpenStringValue: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible
where RawValue == String {
    init(rawValue: String)
    static var known: [Self] { get }
}

/// An integer-valued Apple enumeration that keeps unknown raw values.
public protocol OpenIntValue: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible
where RawValue == Int64 {
    init(rawValue: Int64)
    static var known: [Self] { get }
}

extension OpenStringValue {
    public init(from decoder: Decoder) throws { self.init(rawValue: try decoder.singleValueContainer().decode(String.self)) }
    public func encode(to encoder: Encoder) throws { var c = encoder.singleValueContainer(); try c.encode(rawValue) }
    public var isKnown: Bool { Self.known.contains(self) }
    public var description: String { rawValue }
}

extension OpenIntValue {
    public init(from decoder: Decoder) throws { self.init(rawValue: try decoder.singleValueContainer().decode(Int64.self)) }
    public func encode(to encoder: Encoder) throws { var c = encoder.singleValueContainer(); try c.encode(rawValue) }
    public var isKnown: Bool { Self.known.contains(self) }
    public var description: String { String(rawValue) }
}

public struct AppStoreEnvironment: OpenStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let production = Self(rawValue: "Production")
    public static let sandbox = Self(rawValue: "Sandbox")
    public static let xcode = Self(rawValue: "Xcode")
    public static let localTesting = Self(rawValue: "LocalTesting")
    public static let known: [Self] = [.production, .sandbox, .xcode, .localTesting]
    /// Xcode and LocalTesting data are signed by no Apple server: refused unless a policy opts in.
    public var isLocalTest: Bool { self == .xcode || self == .localTesting }
}

public struct TransactionType: OpenStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let autoRenewable = Self(rawValue: "Auto-Renewable Subscription")
    public static let nonConsumable = Self(rawValue: "Non-Consumable")
    public static let consumable = Self(rawValue: "Consumable")
    public static let nonRenewing = Self(rawValue: "Non-Renewing Subscription")
    public static let known: [Self] = [.autoRenewable, .nonConsumable, .consumable, .nonRenewing]
}

public struct InAppOwnershipType: OpenStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let purchased = Self(rawValue: "PURCHASED")
    public static let familyShared = Self(rawValue: "FAMILY_SHARED")
    public static let known: [Self] = [.purchased, .familyShared]
}

public struct OfferType: OpenIntValue {
    public let rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
    public static let introductory = Self(rawValue: 1)
    public static let promotional = Self(rawValue: 2)
    public static let offerCode = Self(rawValue: 3)
    public static let winBack = Self(rawValue: 4)
    public static let known: [Self] = [.introductory, .promotional, .offerCode, .winBack]
}

public struct OfferDiscountType: OpenStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let freeTrial = Self(rawValue: "FREE_TRIAL")
    public static let payAsYouGo = Self(rawValue: "PAY_AS_YOU_GO")
    public static let payUpFront = Self(rawValue: "PAY_UP_FRONT")
    public static let oneTime = Self(rawValue: "ONE_TIME")
    public static let known: [Self] = [.freeTrial, .payAsYouGo, .payUpFront, .oneTime]
}

public struct RevocationReason: OpenIntValue {
    public let rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
    public static let other = Self(rawValue: 0)
    public static let appIssue = Self(rawValue: 1)
    public static let known: [Self] = [.other, .appIssue]
}

/// How a transaction was revoked (`revocationType`, API 1.19): a full or a prorated refund, or a
/// family member's access withdrawn. Every one ends access at `revocationDate` (README, "Refunds").
public struct RevocationType: OpenStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let refundFull = Self(rawValue: "REFUND_FULL")
    public static let refundProrated = Self(rawValue: "REFUND_PRORATED")
    public static let familyRevoke = Self(rawValue: "FAMILY_REVOKE")
    public static let known: [Self] = [.refundFull, .refundProrated, .familyRevoke]
}

/// How a subscription is billed (`billingPlanType`, `renewalBillingPlanType`): all at once, or
/// monthly within a commitment (`commitmentInfo`).
public struct BillingPlanType: OpenStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let billedUpfront = Self(rawValue: "BILLED_UPFRONT")
    public static let monthly = Self(rawValue: "MONTHLY")
    public static let known: [Self] = [.billedUpfront, .monthly]
}

public struct TransactionReason: OpenStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let purchase = Self(rawValue: "PURCHASE")
    public static let renewal = Self(rawValue: "RENEWAL")
    public static let known: [Self] = [.purchase, .renewal]
}

public struct AutoRenewStatus: OpenIntValue {
    public let rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
    public static let off = Self(rawValue: 0)
    public static let on = Self(rawValue: 1)
    public static let known: [Self] = [.off, .on]
}

public struct ExpirationIntent: OpenIntValue {
    public let rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
    public static let customerCancelled = Self(rawValue: 1)
    public static let billingError = Self(rawValue: 2)
    public static let customerDidNotConsentToPriceIncrease = Self(rawValue: 3)
    public static let productNotAvailable = Self(rawValue: 4)
    public static let other = Self(rawValue: 5)
    public static let known: [Self] = [.customerCancelled, .billingError, .customerDidNotConsentToPriceIncrease,
                                       .productNotAvailable, .other]
}

public struct PriceIncreaseStatus: OpenIntValue {
    public let rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
    public static let notResponded = Self(rawValue: 0)
    public static let consented = Self(rawValue: 1)
    public static let known: [Self] = [.notResponded, .consented]
}

/// App Store Server Notifications V2 `notificationType` (Apple's documented values, named once).
public struct NotificationType: OpenStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let subscribed = Self(rawValue: "SUBSCRIBED")
    public static let didChangeRenewalPref = Self(rawValue: "DID_CHANGE_RENEWAL_PREF")
    public static let didChangeRenewalStatus = Self(rawValue: "DID_CHANGE_RENEWAL_STATUS")
    public static let offerRedeemed = Self(rawValue: "OFFER_REDEEMED")
    public static let didRenew = Self(rawValue: "DID_RENEW")
    public static let expired = Self(rawValue: "EXPIRED")
    public static let didFailToRenew = Self(rawValue: "DID_FAIL_TO_RENEW")
    public static let gracePeriodExpired = Self(rawValue: "GRACE_PERIOD_EXPIRED")
    public static let priceIncrease = Self(rawValue: "PRICE_INCREASE")
    public static let refund = Self(rawValue: "REFUND")
    public static let refundDeclined = Self(rawValue: "REFUND_DECLINED")
    public static let consumptionRequest = Self(rawValue: "CONSUMPTION_REQUEST")
    public static let renewalExtended = Self(rawValue: "RENEWAL_EXTENDED")
    public static let revoke = Self(rawValue: "REVOKE")
    public static let test = Self(rawValue: "TEST")
    public static let renewalExtension = Self(rawValue: "RENEWAL_EXTENSION")
    public static let refundReversed = Self(rawValue: "REFUND_REVERSED")
    public static let externalPurchaseToken = Self(rawValue: "EXTERNAL_PURCHASE_TOKEN")
    public static let oneTimeCharge = Self(rawValue: "ONE_TIME_CHARGE")
    public static let metadataUpdate = Self(rawValue: "METADATA_UPDATE")
    public static let migration = Self(rawValue: "MIGRATION")
    public static let priceChange = Self(rawValue: "PRICE_CHANGE")
    public static let rescindConsent = Self(rawValue: "RESCIND_CONSENT")
    public static let known: [Self] = [
        .subscribed, .didChangeRenewalPref, .didChangeRenewalStatus, .offerRedeemed, .didRenew, .expired,
        .didFailToRenew, .gracePeriodExpired, .priceIncrease, .refund, .refundDeclined, .consumptionRequest,
        .renewalExtended, .revoke, .test, .renewalExtension, .refundReversed, .externalPurchaseToken,
        .oneTimeCharge, .metadataUpdate, .migration, .priceChange, .rescindConsent,
    ]
}

/// App Store Server Notifications V2 `subtype`.
public struct NotificationSubtype: OpenStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let initialBuy = Self(rawValue: "INITIAL_BUY")
    public static let resubscribe = Self(rawValue: "RESUBSCRIBE")
    public static let downgrade = Self(rawValue: "DOWNGRADE")
    public static let upgrade = Self(rawValue: "UPGRADE")
    public static let autoRenewEnabled = Self(rawValue: "AUTO_RENEW_ENABLED")
    public static let autoRenewDisabled = Self(rawValue: "AUTO_RENEW_DISABLED")
    public static let voluntary = Self(rawValue: "VOLUNTARY")
    public static let billingRetry = Self(rawValue: "BILLING_RETRY")
    public static let priceIncrease = Self(rawValue: "PRICE_INCREASE")
    public static let gracePeriod = Self(rawValue: "GRACE_PERIOD")
    public static let pending = Self(rawValue: "PENDING")
    public static let accepted = Self(rawValue: "ACCEPTED")
    public static let billingRecovery = Self(rawValue: "BILLING_RECOVERY")
    public static let productNotForSale = Self(rawValue: "PRODUCT_NOT_FOR_SALE")
    public static let summary = Self(rawValue: "SUMMARY")
    public static let failure = Self(rawValue: "FAILURE")
    public static let unreported = Self(rawValue: "UNREPORTED")
    public static let known: [Self] = [
        .initialBuy, .resubscribe, .downgrade, .upgrade, .autoRenewEnabled, .autoRenewDisabled, .voluntary,
        .billingRetry, .priceIncrease, .gracePeriod, .pending, .accepted, .billingRecovery, .productNotForSale,
        .summary, .failure, .unreported,
    ]
}
