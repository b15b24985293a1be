import Adapters
import HTTPServer
import IAPCore

/// Strict reading of the JSON bodies the API accepts: unknown members are refused (a typo must not
/// drop a field silently), and every refusal is `MALFORMED_REQUEST` (400) with a reason: the JSON
/// codes (MALFORMED_JSON, DUPLICATE_JSON_KEY, INVALID_FIELD_TYPE, MISSING_FIELD) are kept for the
/// content of evidence, which is answered 422.
struct RequestBody {
    private let fields: JSONFields
    private let allowed: Set<String>

    init(_ request: HTTPRequest, allowed: Set<String>) throws(VerificationError) {
        guard Self.isJSON(contentType: request.headers["Content-Type"]) else {
            throw VerificationError(.malformedRequest, "Content-Type must be application/json")
        }
        let value = try Self.parse(request.body, maxDepth: 8)
        guard case .object(let object) = value else {
            throw VerificationError(.malformedRequest, "the body must be a JSON object")
        }
        if let unknown = object.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw VerificationError(.malformedRequest, "unknown member \"\(ClientExcerpt.of(unknown))\"")
        }
        self.fields = JSONFields(object, context: "body")
        self.allowed = allowed
    }

    /// What a route that reads a path parameter, a query or a body (`takesBody`) refuses of one it
    /// cannot read; a body the HTTP server would not hold is refused before the route runs.
    static func refusals(takesBody: Bool) -> [OpenAPIRefusal] {
        let malformed = OpenAPIRefusal(status: "400", description: "a request the route cannot read (MALFORMED_REQUEST)")
        return takesBody ? [malformed, OpenAPIRefusal(status: "413", description: "body too large (INPUT_TOO_LARGE)")] : [malformed]
    }

    /// A request body as strict JSON; any fault in it is the request's (MALFORMED_REQUEST).
    static func parse(_ body: [UInt8], maxDepth: Int) throws(VerificationError) -> JSONValue {
        do {
            return try StrictJSON(maxBytes: max(body.count, 1), maxDepth: maxDepth).parse(body)
        } catch {
            throw VerificationError(.malformedRequest, "the body is not strict JSON: \(error.message)")
        }
    }

    /// A string member of the body; a member of another type is the request's fault.
    func string(_ key: String) throws(VerificationError) -> String? {
        do {
            return try fields.string(key)
        } catch {
            throw VerificationError(.malformedRequest, error.message)
        }
    }

    /// A boolean member of the body; a member of another type is the request's fault.
    func bool(_ key: String) throws(VerificationError) -> Bool? {
        do {
            return try fields.bool(key)
        } catch {
            throw VerificationError(.malformedRequest, error.message)
        }
    }

    /// `application/json`, optionally with `charset=utf-8` (JSON is UTF-8, RFC 8259), and nothing else:
    /// a prefix match let `application/json-seq` or `application/jsonp` through.
    static func isJSON(contentType: String?) -> Bool {
        guard let contentType else { return false }
        // What every client sends, decided without Foundation's Unicode trimming (~2% of a re-claim's CPU).
        if contentType == "application/json" { return true }
        let parts = contentType.split(separator: ";", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard parts.first == "application/json" else { return false }
        return parts.dropFirst().allSatisfy { $0 == "charset=utf-8" || $0 == "charset=\"utf-8\"" }
    }

    /// The claiming account: the app backend's own stable identifier for the user.
    func account() throws(VerificationError) -> String {
        guard let account = try string("account") else {
            throw VerificationError(.malformedRequest, "body.account is required")
        }
        try Self.validateAccount(account)
        return account
    }

    static func validateAccount(_ account: String) throws(VerificationError) {
        guard (1...accountMaxCharacters).contains(account.unicodeScalars.count),
              !account.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw VerificationError(.malformedRequest, "account must be 1 to \(accountMaxCharacters) characters without control characters")
        }
    }

    /// The longest account, in Unicode scalars (what JSON Schema's maxLength counts).
    static let accountMaxCharacters = 256

    /// `validateAccount` as JSON Schema: control characters are Unicode's Cc, U+0000–U+001F and U+007F–U+009F.
    static let accountSchema: JSONValue = .object([
        "type": "string", "minLength": .int(1), "maxLength": .int(Int64(accountMaxCharacters)),
        "pattern": "^[^\\u0000-\\u001F\\u007F-\\u009F]+$",
    ])

    /// The members a verify body may hold: the account, and each evidence form's member and companions.
    static func verifyMembers(_ forms: [EvidenceForm]) -> Set<String> {
        Set(["account"] + forms.flatMap { [$0.member] + $0.companions })
    }

    /// Exactly one kind of purchase evidence, in one of the forms the adapters declare, with only
    /// its own companions.
    func evidence(_ forms: [EvidenceForm]) throws(VerificationError) -> PurchaseEvidence {
        var found: [(EvidenceForm, String)] = []
        for form in forms {
            if let value = try string(form.member) { found.append((form, value)) }
        }
        let members = forms.map(\.member).joined(separator: ", ")
        guard let (form, value) = found.first else {
            throw VerificationError(.malformedRequest, "one of \(members) is required")
        }
        var companions: [String: String] = [:]
        for name in Set(forms.flatMap(\.companions)).sorted() {
            guard let text = try string(name) else { continue }
            guard found.count == 1, form.companions.contains(name) else {
                throw VerificationError(.malformedRequest, "exactly one of \(members); \(name) goes with \(Self.owners(of: name, forms)) only")
            }
            companions[name] = text
        }
        guard found.count == 1 else {
            throw VerificationError(.malformedRequest, "exactly one of \(members)")
        }
        return PurchaseEvidence(kind: form.kind, value: value, companions: companions)
    }

    private static func owners(of companion: String, _ forms: [EvidenceForm]) -> String {
        forms.filter { $0.companions.contains(companion) }.map(\.member).joined(separator: " or ")
    }
}
