import HTTPServer
import IAPCore

/// One query parameter a route reads, declared once: the endpoint reads it through this
/// declaration, and the OpenAPI document describes it from the same one, so the document states
/// exactly the bounds the server enforces.
struct QueryParameter: Sendable {
    enum Kind: Sendable {
        case integer(ClosedRange<Int64>)
        /// 1 to `maxCharacters` Unicode scalars.
        case text(maxCharacters: Int)
        case oneOf([String])
    }

    let name: String
    let kind: Kind
    var required = false

    static func integer(_ name: String, _ range: ClosedRange<Int64>) -> QueryParameter {
        QueryParameter(name: name, kind: .integer(range))
    }

    static func text(_ name: String, maxCharacters: Int = 256, required: Bool = false) -> QueryParameter {
        QueryParameter(name: name, kind: .text(maxCharacters: maxCharacters), required: required)
    }

    static func oneOf(_ name: String, _ values: [String]) -> QueryParameter {
        QueryParameter(name: name, kind: .oneOf(values))
    }

    /// Its value in `query`, checked; nil when absent (and not required).
    func value(in query: [String: String]) throws(VerificationError) -> String? {
        guard let text = query[name] else {
            if required { throw VerificationError(.malformedRequest, "the \(name) query parameter is required") }
            return nil
        }
        switch kind {
        case .integer(let range):
            guard let value = Int64(text), range.contains(value) else {
                throw VerificationError(.malformedRequest, "\(name) must be an integer in \(range.lowerBound)...\(range.upperBound)")
            }
        case .text(let maxCharacters):
            guard (1...maxCharacters).contains(text.unicodeScalars.count) else {
                throw VerificationError(.malformedRequest, "\(name) must be 1 to \(maxCharacters) characters")
            }
        case .oneOf(let values):
            guard values.contains(text) else {
                throw VerificationError(.malformedRequest, "\(name) must be one of \(values.joined(separator: ", "))")
            }
        }
        return text
    }

    /// Its value in `query` as an integer (an `.integer` parameter).
    func integer(in query: [String: String]) throws(VerificationError) -> Int64? {
        try value(in: query).flatMap { Int64($0) }
    }

    /// The OpenAPI parameter object.
    var openAPI: JSONValue {
        let schema: JSONValue = switch kind {
        case .integer(let range):
            .object(["type": "integer", "format": "int64", "minimum": .int(range.lowerBound), "maximum": .int(range.upperBound)])
        case .text(let maxCharacters):
            .object(["type": "string", "minLength": .int(1), "maxLength": .int(Int64(maxCharacters))])
        case .oneOf(let values):
            .object(["type": "string", "enum": .array(values.map(JSONValue.string))])
        }
        return .object(["name": .string(name), "in": "query", "required": .bool(required), "schema": schema])
    }
}

extension [QueryParameter] {
    /// Refuses a query naming a parameter not declared here.
    func refuseUnknown(in query: [String: String]) throws(VerificationError) {
        if let unknown = query.keys.sorted().first(where: { name in !contains { $0.name == name } }) {
            throw VerificationError(.malformedRequest, "unknown query parameter \(ClientExcerpt.of(unknown))")
        }
    }

    subscript(name: String) -> QueryParameter {
        guard let parameter = first(where: { $0.name == name }) else { preconditionFailure("undeclared query parameter \(name)") }
        return parameter
    }
}
