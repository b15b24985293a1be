/// The JSON type of a record field, and of what a mapping conversion produces.
public enum RecordFieldType: String, Sendable {
    case string, integer, boolean
    /// A JSON object kept whole (Apple's nested members, e.g. `commitmentInfo`).
    case object
    /// A JSON array of strings (`eligibleWinBackOfferIds`).
    case stringArray
}

/// One field of a record the mapping engine fills: its name (a mapping rule's target, and the key
/// in canonical JSON), its JSON type, its value as JSON, and how a value of that type is written in.
/// A record's table of these is the one list of its fields: canonical JSON and the mapping files'
/// targets both come from it.
public struct RecordField<Record>: Sendable {
    public let name: String
    public let type: RecordFieldType
    /// The field as canonical JSON; nil: absent, so omitted.
    public let read: @Sendable (Record) -> JSONValue?
    /// Writes a JSON value of `type` (mapping files are checked against it when loaded); a value
    /// of another type writes nothing.
    public let write: @Sendable (inout Record, JSONValue) -> Void

    private static func field<V>(_ name: String, _ type: RecordFieldType, _ path: WritableKeyPath<Record, V?> & Sendable,
                                 json: @escaping @Sendable (V) -> JSONValue,
                                 value: @escaping @Sendable (JSONValue) -> V?) -> Self {
        Self(name: name, type: type, read: { $0[keyPath: path].map(json) },
             write: { record, v in if let x = value(v) { record[keyPath: path] = x } })
    }

    /// A field every record has (an id the mapping requires).
    private static func field<V>(_ name: String, _ type: RecordFieldType, required path: WritableKeyPath<Record, V> & Sendable,
                                 json: @escaping @Sendable (V) -> JSONValue,
                                 value: @escaping @Sendable (JSONValue) -> V?) -> Self {
        Self(name: name, type: type, read: { json($0[keyPath: path]) },
             write: { record, v in if let x = value(v) { record[keyPath: path] = x } })
    }

    public static func string(_ name: String, _ path: WritableKeyPath<Record, String?> & Sendable) -> Self {
        field(name, .string, path, json: JSONValue.string, value: \.stringValue)
    }
    public static func string(_ name: String, _ path: WritableKeyPath<Record, String> & Sendable) -> Self {
        field(name, .string, required: path, json: JSONValue.string, value: \.stringValue)
    }
    public static func int(_ name: String, _ path: WritableKeyPath<Record, Int64?> & Sendable) -> Self {
        field(name, .integer, path, json: JSONValue.int, value: \.intValue)
    }
    public static func int(_ name: String, _ path: WritableKeyPath<Record, Int64> & Sendable) -> Self {
        field(name, .integer, required: path, json: JSONValue.int, value: \.intValue)
    }
    public static func bool(_ name: String, _ path: WritableKeyPath<Record, Bool?> & Sendable) -> Self {
        field(name, .boolean, path, json: JSONValue.bool, value: \.boolValue)
    }
    /// One of Apple's open string enumerations, as its raw value.
    public static func open<V: OpenStringValue>(_ name: String, _ path: WritableKeyPath<Record, V?> & Sendable) -> Self {
        field(name, .string, path, json: { .string($0.rawValue) }, value: { $0.stringValue.map(V.init(rawValue:)) })
    }
    /// One of Apple's open integer enumerations, as its raw value.
    public static func open<V: OpenIntValue>(_ name: String, _ path: WritableKeyPath<Record, V?> & Sendable) -> Self {
        field(name, .integer, path, json: { .int($0.rawValue) }, value: { $0.intValue.map(V.init(rawValue:)) })
    }
    public static func object(_ name: String, _ path: WritableKeyPath<Record, JSONValue?> & Sendable) -> Self {
        field(name, .object, path, json: { $0 }, value: { $0.objectValue.map(JSONValue.object) })
    }
    public static func strings(_ name: String, _ path: WritableKeyPath<Record, [String]?> & Sendable) -> Self {
        field(name, .stringArray, path, json: { .array($0.map(JSONValue.string)) }) { v in
            guard let items = v.arrayValue else { return nil }
            let strings = items.compactMap(\.stringValue)
            return strings.count == items.count ? strings : nil
        }
    }
}

/// A canonical record: its fields, named once (`fields`), and where it came from.
public protocol CanonicalRecord: Sendable {
    static var fields: [RecordField<Self>] { get }
    /// Which adapter produced it ("verifyReceipt", "serverAPI").
    var source: String { get }
    /// The mapping file that produced it, e.g. "verifyReceipt/v1".
    var mappingVersion: String { get }
}

extension CanonicalRecord {
    /// The record as a JSON value, field by field: the same document `JSONEncoder` would write
    /// (absent fields omitted, enums as Apple's raw values), without its cost on the request path.
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = [:]
        // Sized once: grown key by key, the table was rehashed five times per record.
        o.reserveCapacity(Self.fields.count + 2)
        o["source"] = .string(source)
        o["mappingVersion"] = .string(mappingVersion)
        for field in Self.fields {
            if let value = field.read(self) { o[field.name] = value }
        }
        return .object(o)
    }
}

extension CanonicalTransaction: CanonicalRecord {
    public static let fields: [RecordField<Self>] = [
        .string("transactionId", \.transactionId),
        .string("originalTransactionId", \.originalTransactionId),
        .string("webOrderLineItemId", \.webOrderLineItemId),
        .string("bundleId", \.bundleId),
        .int("appAppleId", \.appAppleId),
        .string("productId", \.productId),
        .string("subscriptionGroupIdentifier", \.subscriptionGroupIdentifier),
        .open("type", \.type),
        .int("purchaseDate", \.purchaseDate),
        .int("originalPurchaseDate", \.originalPurchaseDate),
        .int("expiresDate", \.expiresDate),
        .int("quantity", \.quantity),
        .open("inAppOwnershipType", \.inAppOwnershipType),
        .bool("isUpgraded", \.isUpgraded),
        .open("offerType", \.offerType),
        .string("offerIdentifier", \.offerIdentifier),
        .open("offerDiscountType", \.offerDiscountType),
        .int("revocationDate", \.revocationDate),
        .open("revocationReason", \.revocationReason),
        .open("environment", \.environment),
        .string("appAccountToken", \.appAccountToken),
        .string("storefront", \.storefront),
        .int("price", \.price),
        .string("currency", \.currency),
        .open("transactionReason", \.transactionReason),
        .int("signedDate", \.signedDate),
        .string("appTransactionId", \.appTransactionId),
        .string("offerPeriod", \.offerPeriod),
        .open("revocationType", \.revocationType),
        .int("revocationPercentage", \.revocationPercentage),
        .open("billingPlanType", \.billingPlanType),
        .object("commitmentInfo", \.commitmentInfo),
        .object("advancedCommerceInfo", \.advancedCommerceInfo),
    ]
}

extension CanonicalRenewal: CanonicalRecord {
    public static let fields: [RecordField<Self>] = [
        .string("originalTransactionId", \.originalTransactionId),
        .string("productId", \.productId),
        .string("autoRenewProductId", \.autoRenewProductId),
        .open("autoRenewStatus", \.autoRenewStatus),
        .open("expirationIntent", \.expirationIntent),
        .bool("isInBillingRetryPeriod", \.isInBillingRetryPeriod),
        .int("gracePeriodExpiresDate", \.gracePeriodExpiresDate),
        .open("priceIncreaseStatus", \.priceIncreaseStatus),
        .open("offerType", \.offerType),
        .string("offerIdentifier", \.offerIdentifier),
        .open("offerDiscountType", \.offerDiscountType),
        .int("renewalDate", \.renewalDate),
        .int("renewalPrice", \.renewalPrice),
        .string("currency", \.currency),
        .open("environment", \.environment),
        .int("signedDate", \.signedDate),
        .string("appTransactionId", \.appTransactionId),
        .string("appAccountToken", \.appAccountToken),
        .string("offerPeriod", \.offerPeriod),
        .strings("eligibleWinBackOfferIds", \.eligibleWinBackOfferIds),
        .open("renewalBillingPlanType", \.renewalBillingPlanType),
        .object("commitmentInfo", \.commitmentInfo),
        .object("advancedCommerceInfo", \.advancedCommerceInfo),
    ]
}

extension CanonicalAppTransaction: CanonicalRecord {
    public static let fields: [RecordField<Self>] = [
        .string("bundleId", \.bundleId),
        .int("appAppleId", \.appAppleId),
        .open("receiptType", \.receiptType),
        .string("applicationVersion", \.applicationVersion),
        .string("originalApplicationVersion", \.originalApplicationVersion),
        .int("versionExternalIdentifier", \.versionExternalIdentifier),
        .int("receiptCreationDate", \.receiptCreationDate),
        .int("originalPurchaseDate", \.originalPurchaseDate),
        .int("preorderDate", \.preorderDate),
        .int("requestDate", \.requestDate),
        .int("expirationDate", \.expirationDate),
        .string("deviceVerification", \.deviceVerification),
        .string("deviceVerificationNonce", \.deviceVerificationNonce),
        .string("appTransactionId", \.appTransactionId),
        .int("downloadId", \.downloadId),
        .string("originalPlatform", \.originalPlatform),
        .open("environment", \.environment),
    ]
}

/// A JSON object's optional member: set when the value is there, omitted when it is not (the
/// receipt views and other documents built by hand).
extension Dictionary where Key == String, Value == JSONValue {
    public mutating func put(_ key: String, _ value: String?) { if let value { self[key] = .string(value) } }
    public mutating func put(_ key: String, _ value: Int64?) { if let value { self[key] = .int(value) } }
    public mutating func put(_ key: String, _ value: Bool?) { if let value { self[key] = .bool(value) } }
}
