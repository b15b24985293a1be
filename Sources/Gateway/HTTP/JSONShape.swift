import IAPCore

/// One description of a JSON answer that both encodes it and documents it: `encode` builds the
/// body from the value, `schema` is its OpenAPI schema, both from the same members. So the document
/// cannot name a member, a type, an enum value or a requirement the encoder does not keep: a
/// required member is one the encoder always writes, and an object admits no member it does not list.
struct JSONShape<Value>: Sendable {
    /// The schema, or a `$ref` to it once `named`.
    let schema: JSONValue
    /// The named schemas `schema` refers to (its own, once named), for the document's components.
    let components: [String: JSONValue]
    let encode: @Sendable (Value) -> JSONValue

    init(schema: JSONValue, components: [String: JSONValue] = [:], encode: @escaping @Sendable (Value) -> JSONValue) {
        self.schema = schema
        self.components = components
        self.encode = encode
    }

    /// The same shape, documented once under `name` in the components and referred to by it.
    func named(_ name: String) -> JSONShape {
        var components = components
        components[name] = schema
        return JSONShape(schema: .object(["$ref": .string("#/components/schemas/\(name)")]), components: components, encode: encode)
    }

    /// The same shape with a `description` (beside a `$ref`, through `allOf`, as OpenAPI 3.0 reads only the ref).
    func described(_ text: String) -> JSONShape {
        guard case .object(var fields) = schema, fields["$ref"] == nil else {
            return JSONShape(schema: .object(["allOf": .array([schema]), "description": .string(text)]), components: components,
                             encode: encode)
        }
        fields["description"] = .string(text)
        return JSONShape(schema: .object(fields), components: components, encode: encode)
    }

    /// The shape of another value that is encoded as this one.
    func from<Other>(_ transform: @escaping @Sendable (Other) -> Value) -> JSONShape<Other> {
        let encode = encode
        return JSONShape<Other>(schema: schema, components: components) { encode(transform($0)) }
    }

    /// A closed object of `members`: each required one is always written, an optional one when it has a value.
    static func object(_ members: [JSONMember<Value>]) -> JSONShape {
        var properties: [String: JSONValue] = [:]
        var components: [String: JSONValue] = [:]
        for member in members {
            properties[member.name] = member.schema
            components.merge(member.components) { first, _ in first }
        }
        var schema: [String: JSONValue] = ["type": "object", "properties": .object(properties), "additionalProperties": .bool(false)]
        let required = members.filter(\.required).map { JSONValue.string($0.name) }
        if !required.isEmpty { schema["required"] = .array(required) }
        return JSONShape(schema: .object(schema), components: components) { value in
            var object: [String: JSONValue] = [:]
            object.reserveCapacity(members.count)
            for member in members { object[member.name] = member.encode(value) }
            return .object(object)
        }
    }
}

extension JSONShape where Value: CanonicalRecord {
    /// A canonical record, from its one table of fields (`CanonicalRecord.fields`), which also
    /// encodes it: every field it can carry, of its type, and nothing else.
    static func canonical(_ description: String) -> JSONShape {
        var properties: [String: JSONValue] = ["source": .object(["type": "string"]), "mappingVersion": .object(["type": "string"])]
        for field in Value.fields {
            properties[field.name] = switch field.type {
            case .string: .object(["type": "string"])
            case .integer: .object(["type": "integer", "format": "int64"])
            case .boolean: .object(["type": "boolean"])
            case .object: .object(["type": "object"])
            case .stringArray: .object(["type": "array", "items": .object(["type": "string"])])
            }
        }
        return JSONShape(schema: .object(["type": "object", "description": .string(description), "properties": .object(properties),
                                          "required": .array(["source", "mappingVersion"]), "additionalProperties": .bool(false)])) {
            $0.jsonValue
        }
    }
}

extension JSONShape where Value == JSONValue {
    /// A body `shape` already encoded (another answer, nested whole).
    static func encoded<Other>(by shape: JSONShape<Other>) -> JSONShape {
        JSONShape(schema: shape.schema, components: shape.components) { $0 }
    }
}

extension JSONShape where Value == String {
    static var string: JSONShape { JSONShape(schema: .object(["type": "string"])) { .string($0) } }

    /// One of `values`; the encoder is handed values of the same closed set.
    static func oneOf(_ values: [String]) -> JSONShape {
        JSONShape(schema: .object(["type": "string", "enum": .array(values.map(JSONValue.string))])) { .string($0) }
    }
}

extension JSONShape where Value: RawRepresentable & CaseIterable, Value.RawValue == String {
    /// An enum's raw values, all of them.
    static var cases: JSONShape {
        JSONShape<String>.oneOf(Value.allCases.map(\.rawValue)).from { $0.rawValue }
    }
}

extension JSONShape where Value == Int64 {
    static var integer: JSONShape { JSONShape(schema: .object(["type": "integer", "format": "int64"])) { .int($0) } }
}

extension JSONShape where Value == Int {
    /// A count: never negative.
    static var count: JSONShape {
        JSONShape(schema: .object(["type": "integer", "format": "int64", "minimum": .int(0)])) { .int(Int64($0)) }
    }
}

extension JSONShape where Value == Bool {
    static var boolean: JSONShape { JSONShape(schema: .object(["type": "boolean"])) { .bool($0) } }
}

extension JSONShape {
    /// An array of `items`.
    static func array<Element>(_ items: JSONShape<Element>) -> JSONShape where Value == [Element] {
        JSONShape(schema: .object(["type": "array", "items": items.schema]), components: items.components) { .array($0.map(items.encode)) }
    }
}

/// One member of a `JSONShape.object`: its name, its shape, and how it is read from the value.
struct JSONMember<Owner>: Sendable {
    let name: String
    let required: Bool
    let schema: JSONValue
    let components: [String: JSONValue]
    let encode: @Sendable (Owner) -> JSONValue?

    /// Always written.
    static func required<V>(_ name: String, _ shape: JSONShape<V>, _ read: @escaping @Sendable (Owner) -> V) -> JSONMember {
        let encode = shape.encode
        return JSONMember(name: name, required: true, schema: shape.schema, components: shape.components) { encode(read($0)) }
    }

    /// Written when `read` gives a value.
    static func optional<V>(_ name: String, _ shape: JSONShape<V>, _ read: @escaping @Sendable (Owner) -> V?) -> JSONMember {
        let encode = shape.encode
        return JSONMember(name: name, required: false, schema: shape.schema, components: shape.components) { read($0).map(encode) }
    }
}
