/// `Decodable` over a parsed `JSONValue`, exactly as strict as `JSONFields` and failing with its
/// codes and messages: a member absent or null is nil for an optional property and MISSING_FIELD
/// for a required one; a member of another JSON type is INVALID_FIELD_TYPE, never coerced (no number
/// read from a string, no integer from 1.0 or out of its type's range); an open enumeration keeps
/// an unknown raw value; a `JSONValue` (or `[String: JSONValue]`) member is taken whole.
///
/// It lets a model whose property names are the document's member names leave its decoder to the
/// compiler: each member's JSON type and whether it is required are then stated once, by the
/// property's declaration, instead of again by a hand-written read that can drift from it.
/// (`JSONDecoder` is no substitute: it reads the text itself, converts numbers, and a
/// `JSONValue` was already parsed strictly by `StrictJSON`.)
public enum JSONValueDecoding {
    /// Called with every `Int64` member of an object (its key, its value, and its path for a
    /// message, spelled only if asked for) before the member is accepted: where a caller adds a
    /// bound no type states, such as the range of a date in milliseconds.
    public typealias IntegerCheck = @Sendable (_ key: String, _ value: Int64, _ path: () -> String) throws(VerificationError) -> Void

    /// `value` decoded as `T`; `context` names the document in messages ("transaction").
    public static func decode<T: Decodable>(_: T.Type = T.self, from value: JSONValue, context: String,
                                            checkingIntegers check: IntegerCheck? = nil) throws(VerificationError) -> T {
        let decoder = ValueDecoder(value: value, place: Place(base: context, step: .document), parentCodingPath: [], key: nil,
                                   check: check)
        do {
            return try T(from: decoder)
        } catch let error as VerificationError {
            throw error
        } catch {
            // Every container here throws VerificationError; only a type's own init(from:) can
            // throw anything else, and that is still a value of the wrong shape.
            throw VerificationError(.invalidFieldType, "\(context) is not a valid \(T.self): \(error)")
        }
    }
}

extension JSONFields {
    /// The object a `JSONValueDecoding` decoder stands at, named as that decoder names it: for a
    /// type nested in a decoded model whose members need rules no property type states. Refused
    /// for any other decoder, whose reads would not be this strict.
    public init(_ decoder: any Decoder) throws(VerificationError) {
        guard let decoder = decoder as? ValueDecoder else {
            let path = decoder.codingPath.map(\.stringValue).joined(separator: ".")
            throw VerificationError(.invalidFieldType, "\(path) can only be decoded from a JSON value")
        }
        guard case .object(let object) = decoder.value else { throw decoder.notAnObject() }
        self.init(object, context: decoder.place.path)
    }
}

/// Where a value stands, for messages: the path of the object or array it is in (for the document,
/// the document's name) and its step from there. The path itself ("notification.data.bundleId",
/// "x.ids[2]") is spelled only when a message or a nested container needs it: most members are
/// read and never named.
struct Place {
    let base: String
    let step: Step

    enum Step {
        case document
        case member(String)
        case element(Int)
    }

    var path: String {
        switch step {
        case .document: base
        case .member(let key): "\(base).\(key)"
        case .element(let index): "\(base)[\(index)]"
        }
    }

    /// An element's wrong type is said of its array, as `JSONFields` says it.
    func wrongType(_ expected: JSONKind, found: JSONValue) -> VerificationError {
        if case .element = step {
            return VerificationError(.invalidFieldType, "\(base) must be an array of \(expected.plural)")
        }
        return VerificationError(.invalidFieldType, "\(path) must be \(expected.singular), found \(found.typeName)")
    }
}

/// A JSON type a property asks for, as messages name it.
struct JSONKind {
    let singular: String
    let plural: String

    static let string = JSONKind(singular: "a string", plural: "strings")
    static let integer = JSONKind(singular: "an integer", plural: "integers")
    static let boolean = JSONKind(singular: "a boolean", plural: "booleans")
    static let number = JSONKind(singular: "a number", plural: "numbers")
    static let object = JSONKind(singular: "an object", plural: "objects")
    static let array = JSONKind(singular: "an array", plural: "arrays")
}

struct ValueDecoder: Decoder {
    let value: JSONValue
    let place: Place
    let parentCodingPath: [any CodingKey]
    let key: (any CodingKey)?
    let check: JSONValueDecoding.IntegerCheck?
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    var codingPath: [any CodingKey] { key.map { parentCodingPath + [$0] } ?? parentCodingPath }

    func container<Key: CodingKey>(keyedBy _: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let object) = value else { throw notAnObject() }
        return KeyedDecodingContainer(Members<Key>(object: object, decoder: self, path: place.path, codingPath: codingPath))
    }

    /// The document itself is "a JSON object" in JSONFields' message, a member "an object".
    func notAnObject() -> VerificationError {
        guard case .document = place.step else { return place.wrongType(.object, found: value) }
        return VerificationError(.invalidFieldType, "\(place.path) must be a JSON object, found \(value.typeName)")
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else { throw place.wrongType(.array, found: value) }
        return Elements(elements: elements, decoder: self, path: place.path, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { Single(decoder: self) }

    /// `value` as `T`: JSON's own types exactly, `JSONValue` whole, open enumerations as
    /// `JSONFields.open` reads them, any other type by its own `init(from:)` over this decoder.
    func read<T: Decodable>(_: T.Type) throws -> T {
        // JSON's own types by identity first: a protocol test (`is any P.Type`) is a conformance
        // lookup, and most members are plain strings and integers.
        if T.self == String.self {
            guard case .string(let s) = value else { throw place.wrongType(.string, found: value) }
            return s as! T
        }
        if T.self == Int64.self { return try integer(Int64.self) as! T }
        if T.self == JSONValue.self { return value as! T }
        if T.self == [String: JSONValue].self {
            guard case .object(let o) = value else { throw place.wrongType(.object, found: value) }
            return o as! T
        }
        if T.self == Bool.self {
            guard case .bool(let b) = value else { throw place.wrongType(.boolean, found: value) }
            return b as! T
        }
        if let open = T.self as? any OpenStringValue.Type {
            guard case .string(let s) = value else { throw place.wrongType(.string, found: value) }
            return open.init(rawValue: s) as! T
        }
        if let integer = T.self as? any FixedWidthInteger.Type { return try self.integer(integer) as! T }
        if let open = T.self as? any OpenIntValue.Type { return open.init(rawValue: try integer(Int64.self)) as! T }
        if T.self == Double.self || T.self == Float.self { return try number(T.self) }
        return try T(from: self)
    }

    private func integer<I: FixedWidthInteger>(_: I.Type) throws(VerificationError) -> I {
        guard case .int(let i) = value else { throw place.wrongType(.integer, found: value) }
        guard let exact = I(exactly: i) else {
            throw VerificationError(.invalidFieldType, "\(place.path) \(i) is out of range for \(I.self)")
        }
        return exact
    }

    private func number<T>(_: T.Type) throws(VerificationError) -> T {
        let d: Double
        switch value {
        case .double(let x): d = x
        case .int(let i):
            guard let x = Double(exactly: i) else {
                throw VerificationError(.invalidFieldType, "\(place.path) \(i) cannot be held exactly by \(T.self)")
            }
            d = x
        default: throw place.wrongType(.number, found: value)
        }
        if T.self == Double.self { return d as! T }
        guard let f = Float(exactly: d) else {
            throw VerificationError(.invalidFieldType, "\(place.path) \(d) cannot be held exactly by \(T.self)")
        }
        return f as! T
    }
}

/// An object's members. A generic `decode` stands for every typed requirement (Swift lets one
/// generic witness serve them all), so each JSON type is read in one place, `ValueDecoder.read`.
private struct Members<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let object: [String: JSONValue]
    let decoder: ValueDecoder
    /// This object's path and coding path, for its members' decoders.
    let path: String
    let codingPath: [any CodingKey]

    var allKeys: [Key] { object.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { object[key.stringValue] != nil }

    // Absent reads as null: both are nil to `decodeIfPresent`, as to JSONFields.
    func decodeNil(forKey key: Key) throws -> Bool { (object[key.stringValue] ?? .null) == .null }

    private func memberDecoder(_ value: JSONValue, _ key: Key) -> ValueDecoder {
        ValueDecoder(value: value, place: Place(base: path, step: .member(key.stringValue)), parentCodingPath: codingPath, key: key,
                     check: decoder.check)
    }

    /// The member's decoder; absent or null is a missing member, as `JSONFields.required…` has it.
    private func member(_ key: Key) throws(VerificationError) -> ValueDecoder { memberDecoder(try required(key), key) }

    private func required(_ key: Key) throws(VerificationError) -> JSONValue {
        guard let value = object[key.stringValue], value != .null else {
            throw VerificationError(.missingField, "\(path).\(key.stringValue) is required")
        }
        return value
    }

    /// A member's value as `T`. A string or an integer, most members, is read here without a
    /// decoder of its own (one is made only to name the member in a refusal).
    private func read<T: Decodable>(_ value: JSONValue, _ type: T.Type, _ key: Key) throws -> T {
        if T.self == String.self, case .string(let s) = value { return s as! T }
        if T.self == Int64.self, case .int(let i) = value {
            if let check = decoder.check { try check(key.stringValue, i) { memberDecoder(value, key).place.path } }
            return i as! T
        }
        // Anything else, an Int64 that is not an integer included (refused there), by its own decoder.
        return try memberDecoder(value, key).read(type)
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try read(required(key), type, key) }

    // One lookup per member rather than the protocol's default three (contains, decodeNil, decode).
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { try optional(type, key) }

    // The typed requirements have defaults of their own (the three lookups) that the generic one
    // does not replace; the types Apple's payloads use go to the one lookup too.
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try optional(type, key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try optional(type, key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try optional(type, key) }
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try optional(type, key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try optional(type, key) }

    private func optional<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T? {
        guard let value = object[key.stringValue], value != .null else { return nil }
        return try read(value, type, key)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey> {
        try member(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { try member(key).unkeyedContainer() }

    func superDecoder() throws -> any Decoder { decoder }

    func superDecoder(forKey key: Key) throws -> any Decoder { try member(key) }
}

/// An array's elements, in order.
private struct Elements: UnkeyedDecodingContainer {
    let elements: [JSONValue]
    let decoder: ValueDecoder
    /// This array's path and coding path, for its elements' decoders.
    let path: String
    let codingPath: [any CodingKey]
    private(set) var currentIndex = 0

    init(elements: [JSONValue], decoder: ValueDecoder, path: String, codingPath: [any CodingKey]) {
        self.elements = elements
        self.decoder = decoder
        self.path = path
        self.codingPath = codingPath
    }
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, elements[currentIndex] == .null else { return false }
        currentIndex += 1
        return true
    }

    private mutating func next() throws(VerificationError) -> ValueDecoder {
        guard !isAtEnd else {
            throw VerificationError(.missingField, "\(path) has fewer than \(currentIndex + 1) elements")
        }
        defer { currentIndex += 1 }
        return ValueDecoder(value: elements[currentIndex], place: Place(base: path, step: .element(currentIndex)),
                            parentCodingPath: codingPath, key: Index(intValue: currentIndex), check: decoder.check)
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next().read(type) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next().container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }

    mutating func superDecoder() throws -> any Decoder { try next() }
}

/// One value, for types that decode themselves from a single JSON value (`String`, an open enum).
private struct Single: SingleValueDecodingContainer {
    let decoder: ValueDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }
    func decodeNil() -> Bool { decoder.value == .null }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.read(type) }
}

private struct Index: CodingKey {
    let intValue: Int?
    var stringValue: String { intValue.map(String.init) ?? "" }
    init(intValue: Int) { self.intValue = intValue }
    init?(stringValue: String) { nil }
}
