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

    // Each field names its property twice: as the function that reads it (`get`) and as the key
    // path that writes it. A key-path literal passed as a function compiles to a direct property
    // read; applied through a stored `WritableKeyPath & Sendable` it goes through the runtime's
    // key-path projection, ~5x slower (`swift_getAtKeyPath`, 4% of a re-claim's CPU, two records
    // read per request). `RecordFieldTests` proves both name the same property in every table.
    private static func field<V>(_ name: String, _ type: RecordFieldType, _ path: WritableKeyPath<Record, V?> & Sendable,
                                 _ get: @escaping @Sendable (Record) -> V?,
                                 json: @escaping @Sendable (V) -> JSONValue,
                                 value: @escaping @Sendable (JSONValue) -> V?) -> Self {
        Self(name: name, type: type, read: { get($0).map(json) },
             write: { record, v in if let x = value(v) { record[keyPath: path] = x } })
    }

    /// A field every record has (an id the mapping requires).
    private static func field<V>(_ name: String, _ type: RecordFieldType, required path: WritableKeyPath<Record, V> & Sendable,
                                 _ get: @escaping @Sendable (Record) -> V,
                                 json: @escaping @Sendable (V) -> JSONValue,
                                 value: @escaping @Sendable (JSONValue) -> V?) -> Self {
        Self(name: name, type: type, read: { json(get($0)) },
             write: { record, v in if let x = value(v) { record[keyPath: path] = x } })
    }

    public static func string(_ name: String, _ path: WritableKeyPath<Record, String?> & Sendable,
                              _ get: @escaping @Sendable (Record) -> String?) -> Self {
        field(name, .string, path, get, json: JSONValue.string, value: \.stringValue)
    }
    public static func string(_ name: String, _ path: WritableKeyPath<Record, String> & Sendable,
                              _ get: @escaping @Sendable (Record) -> String) -> Self {
        field(name, .string, required: path, get, json: JSONValue.string, value: \.stringValue)
    }
    public static func int(_ name: String, _ path: WritableKeyPath<Record, Int64?> & Sendable,
                           _ get: @escaping @Sendable (Record) -> Int64?) -> Self {
        field(name, .integer, path, get, json: JSONValue.int, value: \.intValue)
    }
    public static func int(_ name: String, _ path: WritableKeyPath<Record, Int64> & Sendable,
                           _ get: @escaping @Sendable (Record) -> Int64) -> Self {
        field(name, .integer, required: path, get, json: JSONValue.int, value: \.intValue)
    }
    public static func bool(_ name: String, _ path: WritableKeyPath<Record, Bool?> & Sendable,
                            _ get: @escaping @Sendable (Record) -> Bool?) -> Self {
        field(name, .boolean, path, get, json: JSONValue.bool, value: \.boolValue)
    }
    /// One of Apple's open string enumerations, as its raw value.
    public static func open<V: OpenStringValue>(_ name: String, _ path: WritableKeyPath<Record, V?> & Sendable,
                                                _ get: @escaping @Sendable (Record) -> V?) -> Self {
        field(name, .string, path, get, json: { .string($0.rawValue) }, value: { $0.stringValue.map(V.init(rawValue:)) })
    }
    /// One of Apple's open integer enumerations, as its raw value.
    public static func open<V: OpenIntValue>(_ name: String, _ path: WritableKeyPath<Record, V?> & Sendable,
                                             _ get: @escaping @Sendable (Record) -> V?) -> Self {
        field(name, .integer, path, get, json: { .int($0.rawValue) }, value: { $0.intValue.map(V.init(rawValue:)) })
    }
    public static func object(_ name: String, _ path: WritableKeyPath<Record, JSONValue?> & Sendable,
                              _ get: @escaping @Sendable (Record) -> JSONValue?) -> Self {
        field(name, .object, path, get, json: { $0 }, value: { $0.objectValue.map(JSONValue.object) })
    }
    public static func strings(_ name: String, _ path: WritableKeyPath<Record, [String]?> & Sendable,
                               _ get: @escaping @Sendable (Record) -> [String]?) -> Self {
        field(name, .stringArray, path, get, json: { .array($0.map(JSONValue.string)) }) { v in
            guard let items = v.arrayValue else { return nil }
            let strings = items.compactMap(\.stringValue)
            return strings.count == items.count ? strings : nil
        }
    }
}

/// A canonical record: its fields, named once (`fields`), and where it came from.
public protocol CanonicalRecord: Sendable {
    static var fields: [RecordField<Self>] { get }
    /// `fields` with `source` and `mappingVersion`, sorted by name: canonical JSON's member order
    /// (`inKeyOrder(fields)`, kept in a static so no write sorts).
    static var fieldsInKeyOrder: [RecordField<Self>] { get }
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

    /// `jsonValue.jsonText`, byte for byte, written member by member in key order: no dictionary
    /// built, none sorted (the ledger writes or compares one per claimed transaction).
    public var jsonText: String {
        var out: [UInt8] = []
        out.reserveCapacity(1024)
        out.append(UInt8(ascii: "{"))
        for field in Self.fieldsInKeyOrder {
            guard let value = field.read(self) else { continue }
            if out.count > 1 { out.append(UInt8(ascii: ",")) }
            JSONValue.writeString(field.name, to: &out)
            out.append(UInt8(ascii: ":"))
            value.write(to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// `fields` and the two members every record has, sorted as `JSONValue` writes an object's keys.
    static func inKeyOrder(_ fields: [RecordField<Self>]) -> [RecordField<Self>] {
        let provenance = [RecordField<Self>(name: "source", type: .string, read: { .string($0.source) }, write: { _, _ in }),
                          RecordField(name: "mappingVersion", type: .string, read: { .string($0.mappingVersion) },
                                      write: { _, _ in })]
        return (fields + provenance).sorted { $0.name < $1.name }
    }
}

extension CanonicalTransaction: CanonicalRecord {
    public static let fieldsInKeyOrder = inKeyOrder(fields)
    public static let fields: [RecordField<Self>] = [
        .string("transactionId", \.transactionId, \.transactionId),
        .string("originalTransactionId", \.originalTransactionId, \.originalTransactionId),
        .string("webOrderLineItemId", \.webOrderLineItemId, \.webOrderLineItemId),
        .string("bundleId", \.bundleId, \.bundleId),
        .int("appAppleId", \.appAppleId, \.appAppleId),
        .string("productId", \.productId, \.productId),
        .string("subscriptionGroupIdentifier", \.subscriptionGroupIdentifier, \.subscriptionGroupIdentifier),
        .open("type", \.type, \.type),
        .int("purchaseDate", \.purchaseDate, \.purchaseDate),
        .int("originalPurchaseDate", \.originalPurchaseDate, \.originalPurchaseDate),
        .int("expiresDate", \.expiresDate, \.expiresDate),
        .int("quantity", \.quantity, \.quantity),
        .open("inAppOwnershipType", \.inAppOwnershipType, \.inAppOwnershipType),
        .bool("isUpgraded", \.isUpgraded, \.isUpgraded),
        .open("offerType", \.offerType, \.offerType),
        .string("offerIdentifier", \.offerIdentifier, \.offerIdentifier),
        .open("offerDiscountType", \.offerDiscountType, \.offerDiscountType),
        .int("revocationDate", \.revocationDate, \.revocationDate),
        .open("revocationReason", \.revocationReason, \.revocationReason),
        .open("environment", \.environment, \.environment),
        .string("appAccountToken", \.appAccountToken, \.appAccountToken),
        .string("storefront", \.storefront, \.storefront),
        .int("price", \.price, \.price),
        .string("currency", \.currency, \.currency),
        .open("transactionReason", \.transactionReason, \.transactionReason),
        .int("signedDate", \.signedDate, \.signedDate),
        .string("appTransactionId", \.appTransactionId, \.appTransactionId),
        .string("offerPeriod", \.offerPeriod, \.offerPeriod),
        .open("revocationType", \.revocationType, \.revocationType),
        .int("revocationPercentage", \.revocationPercentage, \.revocationPercentage),
        .open("billingPlanType", \.billingPlanType, \.billingPlanType),
        .object("commitmentInfo", \.commitmentInfo, \.commitmentInfo),
        .object("advancedCommerceInfo", \.advancedCommerceInfo, \.advancedCommerceInfo),
    ]
}

extension CanonicalRenewal: CanonicalRecord {
    public static let fieldsInKeyOrder = inKeyOrder(fields)
    public static let fields: [RecordField<Self>] = [
        .string("originalTransactionId", \.originalTransactionId, \.originalTransactionId),
        .string("productId", \.productId, \.productId),
        .string("autoRenewProductId", \.autoRenewProductId, \.autoRenewProductId),
        .open("autoRenewStatus", \.autoRenewStatus, \.autoRenewStatus),
        .open("expirationIntent", \.expirationIntent, \.expirationIntent),
        .bool("isInBillingRetryPeriod", \.isInBillingRetryPeriod, \.isInBillingRetryPeriod),
        .int("gracePeriodExpiresDate", \.gracePeriodExpiresDate, \.gracePeriodExpiresDate),
        .open("priceIncreaseStatus", \.priceIncreaseStatus, \.priceIncreaseStatus),
        .open("offerType", \.offerType, \.offerType),
        .string("offerIdentifier", \.offerIdentifier, \.offerIdentifier),
        .open("offerDiscountType", \.offerDiscountType, \.offerDiscountType),
        .int("renewalDate", \.renewalDate, \.renewalDate),
        .int("renewalPrice", \.renewalPrice, \.renewalPrice),
        .string("currency", \.currency, \.currency),
        .open("environment", \.environment, \.environment),
        .int("signedDate", \.signedDate, \.signedDate),
        .string("appTransactionId", \.appTransactionId, \.appTransactionId),
        .string("appAccountToken", \.appAccountToken, \.appAccountToken),
        .string("offerPeriod", \.offerPeriod, \.offerPeriod),
        .strings("eligibleWinBackOfferIds", \.eligibleWinBackOfferIds, \.eligibleWinBackOfferIds),
        .open("renewalBillingPlanType", \.renewalBillingPlanType, \.renewalBillingPlanType),
        .object("commitmentInfo", \.commitmentInfo, \.commitmentInfo),
        .object("advancedCommerceInfo", \.advancedCommerceInfo, \.advancedCommerceInfo),
    ]
}

extension CanonicalAppTransaction: CanonicalRecord {
    public static let fieldsInKeyOrder = inKeyOrder(fields)
    public static let fields: [RecordField<Self>] = [
        .string("bundleId", \.bundleId, \.bundleId),
        .int("appAppleId", \.appAppleId, \.appAppleId),
        .open("receiptType", \.receiptType, \.receiptType),
        .string("applicationVersion", \.applicationVersion, \.applicationVersion),
        .string("originalApplicationVersion", \.originalApplicationVersion, \.originalApplicationVersion),
        .int("versionExternalIdentifier", \.versionExternalIdentifier, \.versionExternalIdentifier),
        .int("receiptCreationDate", \.receiptCreationDate, \.receiptCreationDate),
        .int("originalPurchaseDate", \.originalPurchaseDate, \.originalPurchaseDate),
        .int("preorderDate", \.preorderDate, \.preorderDate),
        .int("requestDate", \.requestDate, \.requestDate),
        .int("expirationDate", \.expirationDate, \.expirationDate),
        .string("deviceVerification", \.deviceVerification, \.deviceVerification),
        .string("deviceVerificationNonce", \.deviceVerificationNonce, \.deviceVerificationNonce),
        .string("appTransactionId", \.appTransactionId, \.appTransactionId),
        .int("downloadId", \.downloadId, \.downloadId),
        .string("originalPlatform", \.originalPlatform, \.originalPlatform),
        .open("environment", \.environment, \.environment),
    ]
}

/// A JSON object's optional member: set when the value is there, omitted when it is not (the
/// receipt views and other documents built by hand).
extension Dictionary where Key == String, Value == JSONValue {
    public mutating func put(_ key: String, _ value: String?) { if let value { self[key] = .string(value) } }
    public mutating func put(_ key: String, _ value: Int64?) { if let value { self[key] = .int(value) } }
    public mutating func put(_ key: String, _ value: Bool?) { if let value { self[key] = .bool(value) } }
}
