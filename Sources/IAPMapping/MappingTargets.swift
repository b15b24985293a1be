import IAPCore

// The canonical fields a mapping rule may write, per target record, with their value types.
// Mapping files are checked against these tables when loaded, so a typo in a target name or a
// conversion that yields the wrong type is refused at start, not discovered on live traffic.

/// The value type of a canonical field, and of what a conversion produces.
public enum MappingFieldType: String, Sendable {
    case string, integer, boolean
    /// A JSON object kept whole (Apple's nested members, e.g. `commitmentInfo`).
    case object
    /// A JSON array of strings (`eligibleWinBackOfferIds`).
    case stringArray
}

/// A converted value on its way into a canonical record.
enum MappedValue: Hashable, Sendable, CustomStringConvertible {
    case string(String)
    case int(Int64)
    case bool(Bool)
    case object([String: JSONValue])
    case strings([String])

    var type: MappingFieldType {
        switch self {
        case .string: .string
        case .int: .integer
        case .bool: .boolean
        case .object: .object
        case .strings: .stringArray
        }
    }

    /// A literal from a mapping file (`set`, `values`, `value`), if it is one of the three types.
    init?(literal: JSONValue) {
        switch literal {
        case .string(let s): self = .string(s)
        case .int(let i): self = .int(i)
        case .bool(let b): self = .bool(b)
        default: return nil
        }
    }

    /// As JSON text, for `iapgw mappings show`.
    var description: String {
        switch self {
        case .string(let s): JSONValue.string(s).jsonText
        case .int(let i): String(i)
        case .bool(let b): String(b)
        case .object(let o): JSONValue.object(o).jsonText
        case .strings(let a): JSONValue.array(a.map(JSONValue.string)).jsonText
        }
    }

    var string: String? { if case .string(let s) = self { s } else { nil } }
    var int: Int64? { if case .int(let i) = self { i } else { nil } }
    var bool: Bool? { if case .bool(let b) = self { b } else { nil } }
    var object: [String: JSONValue]? { if case .object(let o) = self { o } else { nil } }
    var strings: [String]? { if case .strings(let a) = self { a } else { nil } }
}

/// The record a kind of input is normalised into.
public enum MappingTarget: String, Sendable, CaseIterable {
    case transaction
    case renewal
    case appTransaction
    /// Top-level facts of a legacy `verifyReceipt` response (status, environment).
    case response

    var schema: TargetSchema {
        switch self {
        case .transaction: TargetSchema(TransactionFields.setters, required: ["transactionId", "productId"])
        case .renewal: TargetSchema(RenewalFields.setters, required: ["originalTransactionId"])
        case .appTransaction: TargetSchema(AppTransactionFields.setters, required: ["bundleId"])
        case .response: TargetSchema(ResponseFields.setters, required: ["status"])
        }
    }

    /// Every canonical field name rules may write for this target.
    public var fieldNames: [String] { schema.names }
}

/// Names and types of a target's fields, in slot order (a rule's target is a slot index).
struct TargetSchema: Sendable {
    let names: [String]
    let types: [MappingFieldType]
    let index: [String: Int]
    let required: [String]

    init<R>(_ setters: [FieldSetter<R>], required: [String]) {
        names = setters.map(\.name)
        types = setters.map(\.type)
        index = Dictionary(uniqueKeysWithValues: setters.enumerated().map { ($1.name, $0) })
        self.required = required
    }
}

/// Writes one converted value into a record. Validation guarantees the value has `type`.
struct FieldSetter<R>: Sendable {
    let name: String
    let type: MappingFieldType
    let apply: @Sendable (inout R, MappedValue) -> Void

    static func string(_ name: String, _ set: @escaping @Sendable (inout R, String) -> Void) -> Self {
        Self(name: name, type: .string) { r, v in if let s = v.string { set(&r, s) } }
    }
    static func int(_ name: String, _ set: @escaping @Sendable (inout R, Int64) -> Void) -> Self {
        Self(name: name, type: .integer) { r, v in if let i = v.int { set(&r, i) } }
    }
    static func bool(_ name: String, _ set: @escaping @Sendable (inout R, Bool) -> Void) -> Self {
        Self(name: name, type: .boolean) { r, v in if let b = v.bool { set(&r, b) } }
    }
    static func object(_ name: String, _ set: @escaping @Sendable (inout R, JSONValue) -> Void) -> Self {
        Self(name: name, type: .object) { r, v in if let o = v.object { set(&r, .object(o)) } }
    }
    static func strings(_ name: String, _ set: @escaping @Sendable (inout R, [String]) -> Void) -> Self {
        Self(name: name, type: .stringArray) { r, v in if let a = v.strings { set(&r, a) } }
    }
}

/// Fills a record from its slots: the one place where mapped values meet Swift properties.
func buildRecord<R>(_ initial: R, _ setters: [FieldSetter<R>], _ slots: [MappedValue?]) -> R {
    var record = initial
    for (i, value) in slots.enumerated() {
        if let value { setters[i].apply(&record, value) }
    }
    return record
}

enum TransactionFields {
    typealias S = FieldSetter<CanonicalTransaction>
    static let setters: [S] = [
        .string("transactionId") { $0.transactionId = $1 },
        .string("originalTransactionId") { $0.originalTransactionId = $1 },
        .string("webOrderLineItemId") { $0.webOrderLineItemId = $1 },
        .string("bundleId") { $0.bundleId = $1 },
        .int("appAppleId") { $0.appAppleId = $1 },
        .string("productId") { $0.productId = $1 },
        .string("subscriptionGroupIdentifier") { $0.subscriptionGroupIdentifier = $1 },
        .string("type") { $0.type = TransactionType(rawValue: $1) },
        .int("purchaseDate") { $0.purchaseDate = $1 },
        .int("originalPurchaseDate") { $0.originalPurchaseDate = $1 },
        .int("expiresDate") { $0.expiresDate = $1 },
        .int("quantity") { $0.quantity = $1 },
        .string("inAppOwnershipType") { $0.inAppOwnershipType = InAppOwnershipType(rawValue: $1) },
        .bool("isUpgraded") { $0.isUpgraded = $1 },
        .int("offerType") { $0.offerType = OfferType(rawValue: $1) },
        .string("offerIdentifier") { $0.offerIdentifier = $1 },
        .string("offerDiscountType") { $0.offerDiscountType = OfferDiscountType(rawValue: $1) },
        .int("revocationDate") { $0.revocationDate = $1 },
        .int("revocationReason") { $0.revocationReason = RevocationReason(rawValue: $1) },
        .string("environment") { $0.environment = AppStoreEnvironment(rawValue: $1) },
        .string("appAccountToken") { $0.appAccountToken = $1 },
        .string("storefront") { $0.storefront = $1 },
        .int("price") { $0.price = $1 },
        .string("currency") { $0.currency = $1 },
        .string("transactionReason") { $0.transactionReason = TransactionReason(rawValue: $1) },
        .int("signedDate") { $0.signedDate = $1 },
        .string("appTransactionId") { $0.appTransactionId = $1 },
        .string("offerPeriod") { $0.offerPeriod = $1 },
        .string("revocationType") { $0.revocationType = RevocationType(rawValue: $1) },
        .int("revocationPercentage") { $0.revocationPercentage = $1 },
        .string("billingPlanType") { $0.billingPlanType = BillingPlanType(rawValue: $1) },
        .object("commitmentInfo") { $0.commitmentInfo = $1 },
        .object("advancedCommerceInfo") { $0.advancedCommerceInfo = $1 },
    ]
}

enum RenewalFields {
    typealias S = FieldSetter<CanonicalRenewal>
    static let setters: [S] = [
        .string("originalTransactionId") { $0.originalTransactionId = $1 },
        .string("productId") { $0.productId = $1 },
        .string("autoRenewProductId") { $0.autoRenewProductId = $1 },
        .int("autoRenewStatus") { $0.autoRenewStatus = AutoRenewStatus(rawValue: $1) },
        .int("expirationIntent") { $0.expirationIntent = ExpirationIntent(rawValue: $1) },
        .bool("isInBillingRetryPeriod") { $0.isInBillingRetryPeriod = $1 },
        .int("gracePeriodExpiresDate") { $0.gracePeriodExpiresDate = $1 },
        .int("priceIncreaseStatus") { $0.priceIncreaseStatus = PriceIncreaseStatus(rawValue: $1) },
        .int("offerType") { $0.offerType = OfferType(rawValue: $1) },
        .string("offerIdentifier") { $0.offerIdentifier = $1 },
        .string("offerDiscountType") { $0.offerDiscountType = OfferDiscountType(rawValue: $1) },
        .int("renewalDate") { $0.renewalDate = $1 },
        .int("renewalPrice") { $0.renewalPrice = $1 },
        .string("currency") { $0.currency = $1 },
        .string("environment") { $0.environment = AppStoreEnvironment(rawValue: $1) },
        .int("signedDate") { $0.signedDate = $1 },
        .string("appTransactionId") { $0.appTransactionId = $1 },
        .string("appAccountToken") { $0.appAccountToken = $1 },
        .string("offerPeriod") { $0.offerPeriod = $1 },
        .strings("eligibleWinBackOfferIds") { $0.eligibleWinBackOfferIds = $1 },
        .string("renewalBillingPlanType") { $0.renewalBillingPlanType = BillingPlanType(rawValue: $1) },
        .object("commitmentInfo") { $0.commitmentInfo = $1 },
        .object("advancedCommerceInfo") { $0.advancedCommerceInfo = $1 },
    ]
}

enum AppTransactionFields {
    typealias S = FieldSetter<CanonicalAppTransaction>
    static let setters: [S] = [
        .string("bundleId") { $0.bundleId = $1 },
        .int("appAppleId") { $0.appAppleId = $1 },
        .string("receiptType") { $0.receiptType = AppStoreEnvironment(rawValue: $1) },
        .string("applicationVersion") { $0.applicationVersion = $1 },
        .string("originalApplicationVersion") { $0.originalApplicationVersion = $1 },
        .int("versionExternalIdentifier") { $0.versionExternalIdentifier = $1 },
        .int("receiptCreationDate") { $0.receiptCreationDate = $1 },
        .int("originalPurchaseDate") { $0.originalPurchaseDate = $1 },
        .int("preorderDate") { $0.preorderDate = $1 },
        .int("requestDate") { $0.requestDate = $1 },
        .int("expirationDate") { $0.expirationDate = $1 },
        .string("deviceVerification") { $0.deviceVerification = $1 },
        .string("deviceVerificationNonce") { $0.deviceVerificationNonce = $1 },
        .string("appTransactionId") { $0.appTransactionId = $1 },
        .string("originalPlatform") { $0.originalPlatform = $1 },
        .string("environment") { $0.environment = AppStoreEnvironment(rawValue: $1) },
    ]
}

/// The top level of a legacy `verifyReceipt` response.
struct LegacyResponseFacts: Sendable {
    var status: Int64 = 0
    var environment: AppStoreEnvironment?
    var isRetryable: Bool?
}

enum ResponseFields {
    typealias S = FieldSetter<LegacyResponseFacts>
    static let setters: [S] = [
        .int("status") { $0.status = $1 },
        .string("environment") { $0.environment = AppStoreEnvironment(rawValue: $1) },
        .bool("isRetryable") { $0.isRetryable = $1 },
    ]
}
