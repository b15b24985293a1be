import IAPCore

// The fields a mapping rule may write, per target record, with their value types: the records' own
// `fields` tables. Mapping files are checked against them when loaded, so a typo in a target name
// or a conversion that yields the wrong type is refused at start, not discovered on live traffic.

/// A converted value on its way into a canonical record.
enum MappedValue: Hashable, Sendable, CustomStringConvertible {
    case string(String)
    case int(Int64)
    case bool(Bool)
    case object([String: JSONValue])
    case strings([String])

    var type: RecordFieldType {
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

    /// The value as JSON, as the record field it is written into takes it.
    var json: JSONValue {
        switch self {
        case .string(let s): .string(s)
        case .int(let i): .int(i)
        case .bool(let b): .bool(b)
        case .object(let o): .object(o)
        case .strings(let a): .array(a.map(JSONValue.string))
        }
    }

    /// As JSON text, for `iapgw mappings show`.
    var description: String { json.jsonText }
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
        case .transaction: TargetSchema(CanonicalTransaction.fields, required: ["transactionId", "productId"])
        case .renewal: TargetSchema(CanonicalRenewal.fields, required: ["originalTransactionId"])
        case .appTransaction: TargetSchema(CanonicalAppTransaction.fields, required: ["bundleId"])
        case .response: TargetSchema(LegacyResponseFacts.fields, required: ["status"])
        }
    }
}

/// Names and types of a target's fields, in slot order (a rule's target is a slot index).
struct TargetSchema: Sendable {
    let names: [String]
    let types: [RecordFieldType]
    let index: [String: Int]
    let required: [String]

    init<R>(_ fields: [RecordField<R>], required: [String]) {
        names = fields.map(\.name)
        types = fields.map(\.type)
        index = Dictionary(uniqueKeysWithValues: fields.enumerated().map { ($1.name, $0) })
        self.required = required
    }
}

/// Fills a record from its slots: the one place where mapped values meet Swift properties.
func buildRecord<R>(_ initial: R, _ fields: [RecordField<R>], _ slots: [MappedValue?]) -> R {
    var record = initial
    for (i, value) in slots.enumerated() {
        if let value { fields[i].write(&record, value.json) }
    }
    return record
}

/// The top level of a legacy `verifyReceipt` response.
struct LegacyResponseFacts: Sendable {
    var status: Int64 = 0
    var environment: AppStoreEnvironment?
    var isRetryable: Bool?
}

extension LegacyResponseFacts {
    static let fields: [RecordField<Self>] = [
        .int("status", \.status, \.status),
        .open("environment", \.environment, \.environment),
        .bool("isRetryable", \.isRetryable, \.isRetryable),
    ]
}
