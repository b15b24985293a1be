import IAPCore

/// The one generic tree both configuration formats produce (XML property list and plain XML), so a
/// single decoder builds `AppPolicy` and `GatewayConfig` whatever the file's format.
///
/// `line` is where the value was found (both readers know it); equality ignores it, because two
/// files that say the same thing on different lines say the same thing.
public struct ConfigNode: Sendable, Equatable, CustomStringConvertible {
    public enum Value: Sendable, Equatable {
        case dictionary([String: ConfigNode])
        case array([ConfigNode])
        case string(String)
        case integer(Int64)
        case bool(Bool)
    }

    public var value: Value
    public var line: Int?

    public init(_ value: Value, line: Int? = nil) {
        self.value = value
        self.line = line
    }

    public static func == (lhs: ConfigNode, rhs: ConfigNode) -> Bool { lhs.value == rhs.value }

    public var typeName: String {
        switch value {
        case .dictionary: "dictionary"
        case .array: "array"
        case .string: "string"
        case .integer: "integer"
        case .bool: "boolean"
        }
    }

    public var description: String {
        switch value {
        case .dictionary(let d): "{" + d.keys.sorted().map { "\($0): \(d[$0]!)" }.joined(separator: ", ") + "}"
        case .array(let a): "[" + a.map(\.description).joined(separator: ", ") + "]"
        case .string(let s): "\"\(s)\""
        case .integer(let i): String(i)
        case .bool(let b): String(b)
        }
    }
}

/// Builds the `INVALID_CONFIGURATION` message every refusal uses: `<file>:<line>: <key path>: <reason>`
/// (the line when the reader knows it, the key path when there is one).
func configError(_ file: String, line: Int?, path: String, _ reason: String) -> VerificationError {
    var location = file
    if let line { location += ":\(line)" }
    if !path.isEmpty { location += ": \(path)" }
    return VerificationError(.invalidConfiguration, "\(location): \(reason)")
}

/// A node at a known key path, with strict typed reads: a wrong type is refused, never coerced.
struct ConfigField {
    let node: ConfigNode
    let file: String
    let path: String

    func fail(_ reason: String) -> VerificationError {
        configError(file, line: node.line, path: path, reason)
    }

    private func mismatch(_ expected: String) -> VerificationError {
        fail("expected \(expected), found \(node.typeName)")
    }

    func string() throws(VerificationError) -> String {
        guard case .string(let s) = node.value else { throw mismatch("string") }
        return s
    }

    /// A string that must not be empty (identifiers, names, paths).
    func nonEmptyString() throws(VerificationError) -> String {
        let s = try string()
        guard !s.isEmpty else { throw fail("must not be empty") }
        return s
    }

    func integer() throws(VerificationError) -> Int64 {
        guard case .integer(let i) = node.value else { throw mismatch("integer") }
        return i
    }

    func integer(in range: ClosedRange<Int64>) throws(VerificationError) -> Int64 {
        let i = try integer()
        guard range.contains(i) else { throw fail("\(i) is outside \(range.lowerBound)...\(range.upperBound)") }
        return i
    }

    func bool() throws(VerificationError) -> Bool {
        guard case .bool(let b) = node.value else { throw mismatch("boolean") }
        return b
    }

    func array() throws(VerificationError) -> [ConfigField] {
        guard case .array(let items) = node.value else { throw mismatch("array") }
        return items.enumerated().map { ConfigField(node: $1, file: file, path: "\(path)[\($0)]") }
    }

    func object() throws(VerificationError) -> ConfigObject {
        guard case .dictionary(let d) = node.value else { throw mismatch("dictionary") }
        return ConfigObject(fields: d, field: self)
    }

    /// One of a fixed set of words; anything else is refused with the list of accepted words.
    func oneOf<T>(_ choices: [(String, T)]) throws(VerificationError) -> T {
        let s = try string()
        guard let hit = choices.first(where: { $0.0 == s }) else {
            throw fail("\"\(s)\" is not one of \(choices.map(\.0).joined(separator: ", "))")
        }
        return hit.1
    }
}

/// A dictionary being decoded. It remembers which keys were read so `finish()` can refuse the rest:
/// a misspelt security setting must stop the gateway, not be silently ignored.
final class ConfigObject {
    private let fields: [String: ConfigNode]
    private let field: ConfigField
    private var consumed: Set<String> = []

    init(fields: [String: ConfigNode], field: ConfigField) {
        self.fields = fields
        self.field = field
    }

    private func childPath(_ key: String) -> String { field.path.isEmpty ? key : "\(field.path).\(key)" }

    func optional(_ key: String) -> ConfigField? {
        consumed.insert(key)
        return fields[key].map { ConfigField(node: $0, file: field.file, path: childPath(key)) }
    }

    func required(_ key: String) throws(VerificationError) -> ConfigField {
        guard let f = optional(key) else {
            throw configError(field.file, line: field.node.line, path: childPath(key), "required key is missing")
        }
        return f
    }

    func finish() throws(VerificationError) {
        for key in fields.keys.sorted() where !consumed.contains(key) {
            throw configError(field.file, line: fields[key]!.line, path: childPath(key), "unknown key")
        }
    }
}
