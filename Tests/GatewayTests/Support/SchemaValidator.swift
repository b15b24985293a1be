import Foundation
import IAPCore

/// A small JSON Schema (OpenAPI 3.0 subset) validator for the gateway's own document: `$ref` into
/// its components, `allOf`, `oneOf`, `type`, `properties`, `required`, `additionalProperties: false`,
/// `items`, `enum`, string lengths and patterns, integer bounds. Every keyword the document uses is
/// judged; one it does not know fails, so the document cannot outgrow what the tests check.
struct SchemaValidator {
    let components: [String: JSONValue]

    init(document: JSONValue) {
        components = document["components"]?["schemas"]?.objectValue ?? [:]
    }

    static let known: Set<String> = ["$ref", "allOf", "oneOf", "type", "properties", "required", "additionalProperties", "items",
                                     "enum", "minLength", "maxLength", "pattern", "minimum", "maximum", "format", "description"]

    /// What does not hold, by JSON path; empty when `value` is valid.
    func problems(_ value: JSONValue, _ schema: JSONValue, at path: String = "$") -> [String] {
        guard let rules = schema.objectValue else { return ["\(path): the schema is not an object"] }
        if let unknown = rules.keys.first(where: { !Self.known.contains($0) }) { return ["\(path): unknown keyword \(unknown)"] }
        var found: [String] = []
        if let ref = rules["$ref"]?.stringValue {
            let name = String(ref.dropFirst("#/components/schemas/".count))
            guard let target = components[name] else { return ["\(path): no component \(name)"] }
            found += problems(value, target, at: path)
        }
        for part in rules["allOf"]?.arrayValue ?? [] { found += problems(value, part, at: path) }
        if let choices = rules["oneOf"]?.arrayValue {
            let matching = choices.filter { problems(value, $0, at: path).isEmpty }.count
            if matching != 1 { found.append("\(path): matches \(matching) of oneOf's \(choices.count)") }
        }
        if let type = rules["type"]?.stringValue, !Self.isOfType(value, type) {
            return found + ["\(path): \(value.typeName), not \(type)"]
        }
        if let allowed = rules["enum"]?.arrayValue, !allowed.contains(value) { found.append("\(path): \(value) is not in the enum") }
        if case .string(let text) = value {
            let length = Int64(text.unicodeScalars.count)
            if let min = rules["minLength"]?.intValue, length < min { found.append("\(path): shorter than \(min)") }
            if let max = rules["maxLength"]?.intValue, length > max { found.append("\(path): longer than \(max)") }
            if let pattern = rules["pattern"]?.stringValue, text.range(of: pattern, options: .regularExpression) == nil {
                found.append("\(path): does not match \(pattern)")
            }
        }
        if case .int(let number) = value {
            if let min = rules["minimum"]?.intValue, number < min { found.append("\(path): below \(min)") }
            if let max = rules["maximum"]?.intValue, number > max { found.append("\(path): above \(max)") }
        }
        if case .array(let items) = value, let itemSchema = rules["items"] {
            for (i, item) in items.enumerated() { found += problems(item, itemSchema, at: "\(path)[\(i)]") }
        }
        if case .object(let members) = value {
            let properties = rules["properties"]?.objectValue ?? [:]
            for name in rules["required"]?.arrayValue?.compactMap(\.stringValue) ?? [] where members[name] == nil {
                found.append("\(path): lacks required \(name)")
            }
            for (name, member) in members.sorted(by: { $0.key < $1.key }) {
                if let schema = properties[name] {
                    found += problems(member, schema, at: "\(path).\(name)")
                } else if rules["additionalProperties"] == .bool(false) {
                    found.append("\(path): member \(name) is not declared")
                }
            }
        }
        return found
    }

    /// `name`'s component.
    func problems(_ value: JSONValue, component name: String) -> [String] {
        problems(value, .object(["$ref": .string("#/components/schemas/\(name)")]))
    }

    private static func isOfType(_ value: JSONValue, _ type: String) -> Bool {
        switch (type, value) {
        case ("object", .object), ("array", .array), ("string", .string), ("integer", .int), ("boolean", .bool): true
        case ("number", .int), ("number", .double): true
        default: false
        }
    }
}
