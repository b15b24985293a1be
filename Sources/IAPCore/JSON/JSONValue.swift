/// A JSON document as parsed by `StrictJSON`: integers stay exact (Apple's ids and milliseconds
/// exceed 2^53 in places), objects keep every key once.
public enum JSONValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public var objectValue: [String: JSONValue]? { if case .object(let o) = self { o } else { nil } }
    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    public var intValue: Int64? { if case .int(let i) = self { i } else { nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    public subscript(key: String) -> JSONValue? { objectValue?[key] }

    /// The JSON type name used in error messages ("string", "integer", ...).
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .int: "integer"
        case .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

/// Codable so canonical records that keep Apple's nested members whole (`commitmentInfo`) store
/// and load as the JSON they are; integers stay exact (Int64 before Double).
extension JSONValue: Codable {
    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let i = try? c.decode(Int64.self) { self = .int(i) }
        else if let d = try? c.decode(Double.self) { self = .double(d) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([JSONValue].self) { self = .array(a) }
        else { self = .object(try c.decode([String: JSONValue].self)) }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .int(let i): try c.encode(i)
        case .double(let d): try c.encode(d)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }
}

/// Literals make hand-built documents (OpenAPI, test payloads) readable.
extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

/// Typed, strict reads of a JSON object's fields: absent (or null) is `nil`; present with the wrong
/// JSON type is `INVALID_FIELD_TYPE`, never coerced. A date or price sent as a string is refused.
public struct JSONFields: Sendable {
    public let object: [String: JSONValue]
    public let context: String

    public init(_ object: [String: JSONValue], context: String) {
        self.object = object
        self.context = context
    }

    public init(_ value: JSONValue, context: String) throws(VerificationError) {
        guard case .object(let o) = value else {
            throw VerificationError(.invalidFieldType, "\(context) must be a JSON object, found \(value.typeName)")
        }
        self.init(o, context: context)
    }

    private func wrongType(_ key: String, _ expected: String, _ found: JSONValue) -> VerificationError {
        VerificationError(.invalidFieldType, "\(context).\(key) must be \(expected), found \(found.typeName)")
    }

    /// The field as `read` takes it: absent or null is nil, any other JSON type is the error.
    private func typed<T>(_ key: String, _ expected: String, _ read: (JSONValue) -> T?) throws(VerificationError) -> T? {
        guard let v = object[key], v != .null else { return nil }
        guard let t = read(v) else { throw wrongType(key, expected, v) }
        return t
    }

    public func string(_ key: String) throws(VerificationError) -> String? { try typed(key, "a string", \.stringValue) }

    public func int64(_ key: String) throws(VerificationError) -> Int64? { try typed(key, "an integer", \.intValue) }

    public func bool(_ key: String) throws(VerificationError) -> Bool? { try typed(key, "a boolean", \.boolValue) }

    public func fields(_ key: String) throws(VerificationError) -> JSONFields? {
        try typed(key, "an object", \.objectValue).map { JSONFields($0, context: "\(context).\(key)") }
    }

    public func array(_ key: String) throws(VerificationError) -> [JSONValue]? { try typed(key, "an array", \.arrayValue) }

    public func requiredString(_ key: String) throws(VerificationError) -> String {
        guard let s = try string(key) else { throw VerificationError(.missingField, "\(context).\(key) is required") }
        return s
    }

    public func requiredInt64(_ key: String) throws(VerificationError) -> Int64 {
        guard let i = try int64(key) else { throw VerificationError(.missingField, "\(context).\(key) is required") }
        return i
    }

    // Inlinable so each model's calls are specialised: unspecialised, the generic dispatch cost
    // more than the lookup (seen in profiles of the warm JWS path, ~10 per transaction).
    @inlinable
    public func open<V: OpenStringValue>(_ key: String, as _: V.Type = V.self) throws(VerificationError) -> V? {
        guard let raw = try string(key) else { return nil }
        return V(rawValue: raw)
    }

    @inlinable
    public func open<V: OpenIntValue>(_ key: String, as _: V.Type = V.self) throws(VerificationError) -> V? {
        guard let raw = try int64(key) else { return nil }
        return V(rawValue: raw)
    }

    public func requiredOpen<V: OpenStringValue>(_ key: String, as _: V.Type = V.self) throws(VerificationError) -> V {
        V(rawValue: try requiredString(key))
    }

    public func requiredOpen<V: OpenIntValue>(_ key: String, as _: V.Type = V.self) throws(VerificationError) -> V {
        V(rawValue: try requiredInt64(key))
    }
}
