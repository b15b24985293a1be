import IAPCore

// The closed set of conversions a mapping rule may name. A mapping file cannot add one: a new
// conversion is code, reviewed and tested here; a file naming anything else is INVALID_MAPPING.

/// How a rule turns one input JSON value into a canonical value.
public enum MappingConversion: String, Sendable, CaseIterable {
    /// JSON string → string.
    case string
    /// JSON integer → integer (a string of digits is refused: the Server API sends real numbers).
    case int
    /// JSON boolean → boolean.
    case bool
    /// String of decimal digits (milliseconds since 1970, as verifyReceipt sends dates) → integer.
    case msString
    /// String holding a decimal integer, optional leading `-` → integer ("1" → 1; "abc" refused).
    case intString
    /// "true"/"false"/"1"/"0" → boolean; anything else is refused.
    case boolString
    /// Like `boolString`, but writes nothing itself: when true, the rule's `set` assignments apply.
    case flag
    /// Looks the raw value (string or integer) up in the rule's `values` table. A raw value not in
    /// the table is kept as-is (a string target keeps the string; an integer target keeps an
    /// integer or a string of digits), so a value Apple adds tomorrow is not lost.
    case `enum`
    /// No input field: writes the rule's `value` into every record of the kind.
    case constant
    /// JSON object → the same object, kept whole (members and unknown members alike): Apple's
    /// nested structures such as `commitmentInfo` and `advancedCommerceInfo`.
    case object
    /// JSON array of strings → the same list (`eligibleWinBackOfferIds`); any other element refused.
    case stringArray

    /// What the conversion produces, or nil when the type comes from the target (`enum`) or it
    /// produces nothing itself (`flag`).
    var output: RecordFieldType? {
        switch self {
        case .string: .string
        case .int, .msString, .intString: .integer
        case .bool, .boolString: .boolean
        case .object: .object
        case .stringArray: .stringArray
        case .flag, .enum, .constant: nil
        }
    }
}

/// A compiled `enum` table: raw input (as text) → canonical value.
struct EnumTable: Sendable {
    let values: [String: MappedValue]
    let output: RecordFieldType
}

extension MappingConversion {
    /// Converts `value` (never JSON null: absent and null are skipped before). `path` names the
    /// field in errors; values themselves are never echoed (an app account token is personal data).
    func convert(_ value: JSONValue, table: EnumTable?, path: @autoclosure () -> String) throws(VerificationError) -> MappedValue {
        func wrong(_ expected: String) -> VerificationError {
            VerificationError(.invalidFieldType, "\(path()) must be \(expected), found \(value.typeName)")
        }
        func badText(_ expected: String) -> VerificationError {
            VerificationError(.invalidFieldType, "\(path()) must be \(expected), found a string that is not")
        }
        switch self {
        case .string:
            guard case .string(let s) = value else { throw wrong("a string") }
            return .string(s)
        case .int:
            guard case .int(let i) = value else { throw wrong("an integer") }
            return .int(i)
        case .bool:
            guard case .bool(let b) = value else { throw wrong("a boolean") }
            return .bool(b)
        case .msString:
            guard case .string(let s) = value else { throw wrong("a string of milliseconds") }
            guard let ms = Self.digits(s) else { throw badText("a string of milliseconds") }
            return .int(ms)
        case .intString:
            guard case .string(let s) = value else { throw wrong("a string holding an integer") }
            guard let i = Self.integer(s) else { throw badText("a string holding an integer") }
            return .int(i)
        case .boolString, .flag:
            guard case .string(let s) = value else { throw wrong("a string \"true\"/\"false\"/\"1\"/\"0\"") }
            switch s {
            case "true", "1": return .bool(true)
            case "false", "0": return .bool(false)
            default: throw badText("\"true\"/\"false\"/\"1\"/\"0\"")
            }
        case .enum:
            guard let table else { throw VerificationError(.invalidMapping, "\(path()): enum rule without a table") }
            let raw: String
            switch value {
            case .string(let s): raw = s
            case .int(let i): raw = String(i)
            default: throw wrong("a string or an integer")
            }
            if let mapped = table.values[raw] { return mapped }
            switch table.output {
            case .string: return .string(raw)
            case .integer:
                guard let i = Self.integer(raw) else { throw badText("an integer value") }
                return .int(i)
            case .boolean, .object, .stringArray:
                throw VerificationError(.invalidFieldType, "\(path()) has a value outside its table")
            }
        case .constant:
            throw VerificationError(.invalidMapping, "\(path()): a constant rule reads no input")
        case .object:
            guard case .object(let o) = value else { throw wrong("an object") }
            return .object(o)
        case .stringArray:
            guard case .array(let items) = value else { throw wrong("an array of strings") }
            var strings: [String] = []
            for item in items {
                guard case .string(let s) = item else { throw wrong("an array of strings") }
                strings.append(s)
            }
            return .strings(strings)
        }
    }

    /// Unsigned decimal digits only (no sign, no spaces, no "+"), within Int64.
    static func digits(_ s: String) -> Int64? {
        guard !s.isEmpty, s.utf8.count <= 19, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(s)
    }

    /// An optional `-` then decimal digits, within Int64.
    static func integer(_ s: String) -> Int64? {
        if s.hasPrefix("-") {
            guard let magnitude = digits(String(s.dropFirst())) else { return nil }
            return -magnitude
        }
        return digits(s)
    }
}
