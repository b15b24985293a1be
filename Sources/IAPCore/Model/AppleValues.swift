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

public struct NotificationType: OpenStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let known: [Self] = [
        "SUBSCRIBED", "DID_CHANGE_RENEWAL_PREF", "DID_CHANGE_RENEWAL_STATUS", "OFFER_REDEEMED", "DID_RENEW",
        "EXPIRED", "DID_FAIL_TO_RENEW", "GRACE_PERIOD_EXPIRED", "PRICE_INCREASE", "REFUND", "REFUND_DECLINED",
        "CONSUMPTION_REQUEST", "RENEWAL_EXTENDED", "REVOKE", "TEST", "RENEWAL_EXTENSION", "REFUND_REVERSED",
        "EXTERNAL_PURCHASE_TOKEN", "ONE_TIME_CHARGE", "METADATA_UPDATE", "MIGRATION", "PRICE_CHANGE",
        "RESCIND_CONSENT",
    ].map(Self.init(rawValue:))
}

public struct NotificationSubtype: OpenStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let known: [Self] = [
        "INITIAL_BUY", "RESUBSCRIBE", "DOWNGRADE", "UPGRADE", "AUTO_RENEW_ENABLED", "AUTO_RENEW_DISABLED",
        "VOLUNTARY", "BILLING_RETRY", "PRICE_INCREASE", "GRACE_PERIOD", "PENDING", "ACCEPTED",
        "BILLING_RECOVERY", "PRODUCT_NOT_FOR_SALE", "SUMMARY", "FAILURE", "UNREPORTED",
    ].map(Self.init(rawValue:))
}
