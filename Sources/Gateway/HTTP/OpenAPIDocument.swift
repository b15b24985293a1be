import Adapters
import IAPCore

/// The OpenAPI 3 description of the gateway's API, built from `Route.table` so every documented
/// path is a real route (and a test checks each one against the dispatcher).
enum OpenAPIDocument {
    /// `evidence`: the registered adapters' forms, which the verify request's schema lists.
    static func json(evidence: [EvidenceForm]) -> String { document(evidence: evidence).jsonText }

    static func document(evidence: [EvidenceForm]) -> JSONValue {
        var paths: [String: JSONValue] = [:]
        for (method, path) in Route.table {
            var operations = paths[path]?.objectValue ?? [:]
            operations[method.lowercased()] = operation(method: method, path: path)
            paths[path] = .object(operations)
        }
        return .object([
            "openapi": "3.0.3",
            "info": .object(["title": "IAPGateway", "version": "1.0.0",
                             "description": "Verifies Apple In-App Purchases (legacy receipts and App Store Server API) and binds them to accounts."]),
            "paths": .object(paths),
            "components": .object([
                "securitySchemes": .object(["apiKey": .object(["type": "http", "scheme": "bearer"])]),
                "schemas": .object(schemas(evidence: evidence)),
            ]),
        ])
    }

    private static func operation(method: String, path: String) -> JSONValue {
        var op: [String: JSONValue] = [:]
        var parameters: [JSONValue] = []
        for name in ["bundleId", "account"] where path.contains("{\(name)}") {
            parameters.append(.object(["name": .string(name), "in": "path", "required": .bool(true),
                                       "schema": .object(["type": "string"])]))
        }
        if path == "/v1/apps/{bundleId}/comparisons" {
            for (name, type) in [("from", "integer"), ("to", "integer"), ("class", "string"), ("field", "string"),
                                 ("productId", "string"), ("failure", "string"), ("limit", "integer")] {
                parameters.append(.object(["name": .string(name), "in": "query", "required": .bool(false),
                                           "schema": .object(["type": .string(type)])]))
            }
        }
        if path == "/v1/apps/{bundleId}/cutover-impact" {
            for name in ["from", "to"] {
                parameters.append(.object(["name": .string(name), "in": "query", "required": .bool(false),
                                           "schema": .object(["type": "integer"])]))
            }
        }
        if path == "/v1/apps/{bundleId}/accounts/{account}/history" {
            for name in ["since", "limit"] {
                parameters.append(.object(["name": .string(name), "in": "query", "required": .bool(false),
                                           "schema": .object(["type": "integer"])]))
            }
        }
        if path == "/dashboard" {
            for (name, type, required) in [("app", "string", true), ("from", "integer", false), ("to", "integer", false),
                                           ("format", "string", false)] {
                parameters.append(.object(["name": .string(name), "in": "query", "required": .bool(required),
                                           "schema": .object(["type": .string(type)])]))
            }
        }
        if !parameters.isEmpty { op["parameters"] = .array(parameters) }
        let authenticated = path.hasPrefix("/v1/apps/") || path == "/dashboard"
        if authenticated { op["security"] = .array([.object(["apiKey": .array([])])]) }
        var responses: [String: JSONValue] = [:]
        switch path {
        case "/healthz": op["summary"] = "Liveness"; responses["200"] = ok("Status")
        case "/readyz": op["summary"] = "Readiness (storage answers within 1 s and takes writes)"; responses["200"] = ok("Status"); responses["503"] = error("not ready")
        case "/openapi.json": op["summary"] = "This document"; responses["200"] = .object(["description": "OpenAPI 3 document"])
        case "/metrics": op["summary"] = "Prometheus metrics"; responses["200"] = .object(["description": "text/plain metrics"])
        case "/dashboard":
            op["summary"] = "Migration dashboard of one app (?app=BUNDLE, Bearer key of that app): readiness verdict per environment with every unmet criterion, cutover impact, path failures by class, agreement per day and field, disagreements by class and field (inline SVG), side-by-side table"
            responses["200"] = .object(["description": "self-contained HTML page (no scripts, nothing loaded from the network); with format=csv the disagreements (one row per finding) and path failures as CSV",
                                        "content": .object(["text/html": .object(["schema": string]),
                                                            "text/csv": .object(["schema": string])])])
        case "/v1/apps/{bundleId}/nonces":
            op["summary"] = "Issue a single-use nonce bound to an account, to send with a receipt"
            op["requestBody"] = body("NonceRequest")
            responses["200"] = ok("Nonce")
        case "/v1/apps/{bundleId}/verify":
            op["summary"] = "Verify purchase evidence, bind it to the account and answer its entitlements"
            op["requestBody"] = body("VerifyRequest")
            responses["200"] = ok("VerifyResponse")
            responses["409"] = error("bound to another account (TRANSACTION_BOUND_TO_OTHER_ACCOUNT)")
            responses["413"] = error("body too large (INPUT_TOO_LARGE)")
            responses["422"] = error("the evidence was refused, its content included (see the error code)")
            responses["500"] = error("the gateway's configuration or an internal fault (INVALID_CONFIGURATION, INTERNAL_ERROR); not retryable")
            responses["502"] = error("Apple refused the gateway's credentials (UPSTREAM_CREDENTIALS_REJECTED) or answered in a shape the gateway cannot use (UPSTREAM_INVALID_RESPONSE)")
            responses["503"] = error("Apple or storage unavailable, or Apple's Retry-After is beyond the request's budget; see Retry-After (Apple's own when it sent one)")
        case "/v1/apps/{bundleId}/accounts/{account}/entitlements":
            op["summary"] = "Current entitlements of an account"
            responses["200"] = ok("Entitlements")
        case "/v1/apps/{bundleId}/accounts/{account}/history":
            op["summary"] = "Support history of an account: its verification attempts since `since` (ms; newest first, at most `limit`, default 100, up to 1000), each with request id, evidence kind, the evidence's SHA-256 prefix, X-Client-Version, environment, Apple's status, verdict and code; and each purchase chain it owns with grants (renewals, refunds), state and notifications"
            responses["200"] = ok("History")
        case "/v1/apps/{bundleId}/comparisons":
            op["summary"] = "Stored migration comparisons (legacy vs Server API), filtered by time (ms), class, field, product and failure code (either path's error); with agreement counts"
            responses["200"] = ok("Comparisons")
        case "/v1/apps/{bundleId}/cutover-impact":
            op["summary"] = "The cutover verdict (every unmet criterion, per environment) and who would lose or gain access or see another expiry if the app's receipts switched to the Server API now"
            responses["200"] = ok("CutoverImpact")
        case "/v1/notifications/{bundleId}":
            op["summary"] = "App Store Server Notifications (V2 signedPayload, or V1 with the shared secret); 200 once stored durably"
            op["requestBody"] = body("Notification")
            responses["200"] = ok("NotificationAccepted")
            responses["400"] = error("a body that is not strict JSON or not a notification's shape (MALFORMED_REQUEST)")
            responses["401"] = error("V1 notification without the shared secret", headers: ["WWW-Authenticate"])
            responses["404"] = error("unknown app (UNKNOWN_APP)")
            responses["422"] = error("a signature, identity or content check failed; nothing was stored")
            responses["503"] = error("storage unavailable; Apple retries")
        default: break
        }
        if authenticated {
            responses["400"] = error("a request the route cannot read (MALFORMED_REQUEST)")
            responses["401"] = error("missing or wrong API key (UNAUTHENTICATED); WWW-Authenticate: Bearer",
                                     headers: ["WWW-Authenticate"])
            responses["404"] = error("unknown app (UNKNOWN_APP)")
        }
        responses["405"] = error("another method on this path (METHOD_NOT_ALLOWED); Allow names this one", headers: ["Allow"])
        op["responses"] = .object(responses)
        return .object(op)
    }

    private static func ref(_ name: String) -> JSONValue { .object(["$ref": .string("#/components/schemas/\(name)")]) }
    private static func ok(_ schema: String) -> JSONValue {
        .object(["description": "OK", "content": .object(["application/json": .object(["schema": ref(schema)])])])
    }
    private static func error(_ description: String, headers: [String] = []) -> JSONValue {
        var response: [String: JSONValue] = [
            "description": .string(description), "content": .object(["application/json": .object(["schema": ref("Error")])]),
        ]
        if !headers.isEmpty {
            response["headers"] = .object(Dictionary(uniqueKeysWithValues: headers.map { ($0, .object(["schema": string])) }))
        }
        return .object(response)
    }
    private static func body(_ schema: String) -> JSONValue {
        .object(["required": .bool(true), "content": .object(["application/json": .object(["schema": ref(schema)])])])
    }

    private static func object(_ properties: [String: JSONValue], required: [String] = []) -> JSONValue {
        var o: [String: JSONValue] = ["type": "object", "properties": .object(properties)]
        if !required.isEmpty { o["required"] = .array(required.map(JSONValue.string)) }
        return .object(o)
    }
    private static let string: JSONValue = .object(["type": "string"])
    private static let integer: JSONValue = .object(["type": "integer", "format": "int64"])
    private static func array(_ items: JSONValue) -> JSONValue { .object(["type": "array", "items": items]) }

    private static func schemas(evidence forms: [EvidenceForm]) -> [String: JSONValue] {
        [
            "Status": object(["status": string]),
            "Error": object(["error": object(["code": string, "message": string, "retryable": .object(["type": "boolean"]),
                                              "requestId": .object(["type": "string", "description": "the X-Request-Id of this answer; the log line with the details carries it"])],
                                             required: ["code", "message", "retryable"])], required: ["error"]),
            "NonceRequest": object(["account": string], required: ["account"]),
            "Nonce": object(["nonce": string, "expiresAt": integer]),
            "VerifyRequest": .object([
                "description": .string("account plus exactly one of: " + forms.map { form in
                    form.member + (form.companions.isEmpty ? "" : " (with " + form.companions.joined(separator: ", ") + ")")
                        + ": " + form.summary
                }.joined(separator: "; ")),
                "type": "object",
                "properties": .object(Dictionary(uniqueKeysWithValues: RequestBody.verifyMembers(forms).map { ($0, string) })),
                "required": .array(["account"]),
            ]),
            "VerifyResponse": object([
                "account": string,
                "verdict": .object(["type": "string", "enum": .array(VerifyVerdict.allCases.map { .string($0.rawValue) }),
                                    "description": "granted: at least one purchase of the evidence grants access now; notGranted: genuine and bound to the account, but nothing grants access now. Evidence whose presented purchases are all refunded or revoked is refused instead (422 TRANSACTION_REVOKED)."]),
                "adapter": string, "environment": string, "mappingVersion": string,
                "transactions": array(.object(["type": "object", "description": "CanonicalTransaction"])),
                "newlyGranted": array(string), "alreadyGranted": array(string), "revoked": array(string),
                "entitlements": array(ref("Entitlement")),
            ]),
            "Entitlement": object(["productId": string,
                                   "state": .object(["type": "string",
                                                     "enum": .array(Entitlement.State.allCases.map { .string($0.rawValue) }),
                                                     "description": .string("as it stands at the answer's time (dates judged with a \(EntitlementAccess.clockSkewAllowanceMillis) ms clock-skew allowance)")]),
                                   "originalTransactionId": string,
                                   "expiresDate": .object(["type": "integer", "format": "int64",
                                                           "description": "end of the state's period (in grace: the grace period's end)"]),
                                   "source": string, "grantsAccess": .object(["type": "boolean"])]),
            "Entitlements": object(["account": string, "entitlements": array(ref("Entitlement"))]),
            "History": object([
                "bundleId": string, "account": string, "truncated": .object(["type": "boolean"]),
                "attempts": array(object([
                    "time": integer, "requestId": string, "evidenceKind": string,
                    "evidenceSHA256Prefix": .object(["type": "string", "description": "the first 16 hex digits of the evidence's SHA-256; the evidence itself is never kept"]),
                    "clientVersion": .object(["type": "string", "description": "the app backend's X-Client-Version header, at most 64 printable ASCII characters"]),
                    "environment": string,
                    "appleStatus": .object(["type": "string", "description": "what Apple answered, in order: verifyReceipt statuses (\"21007 0\") or Server API failures (\"HTTP 404 errorCode 4040010\")"]),
                    "verdict": .object(["type": "string", "enum": .array(["granted", "refused"])]),
                    "code": string, "adapter": string, "account": string,
                    "transactionIds": array(string), "productIds": array(string),
                ])),
                "chains": array(object([
                    "originalTransactionId": string, "owner": string, "boundAt": integer,
                    "grants": array(object(["transactionId": string, "productId": string, "firstGrantedAt": integer,
                                            "updatedAt": integer, "purchaseDate": integer, "expiresDate": integer,
                                            "revocationDate": integer, "revocationReason": integer,
                                            "environment": string, "source": string])),
                    "entitlement": ref("Entitlement"),
                    "subscription": object(["state": string, "productId": string, "expiresDate": integer,
                                            "autoRenewStatus": integer, "source": string, "lastSignedDate": integer]),
                    "notifications": array(object(["notificationType": string, "subtype": string, "signedDate": integer,
                                                   "receivedAt": integer, "environment": string,
                                                   "status": .object(["type": "string", "enum": .array(["processed", "parked", "pending"])])])),
                ])),
            ]),
            "Notification": .object(["type": "object", "description": "V2: {\"signedPayload\": JWS}; V1: Apple's legacy JSON with password and unified_receipt",
                                     "properties": .object(["signedPayload": string])]),
            "NotificationAccepted": object(["status": string, "notificationId": string]),
            "Comparisons": object([
                "counts": object(["total": integer, "agreed": integer]),
                "comparisons": array(ref("Comparison")),
            ]),
            "Comparison": object([
                "id": string, "comparedAt": integer, "evidenceKind": string, "evidenceSHA256": string,
                "agreed": .object(["type": "boolean"]), "transactionCount": integer, "productIds": array(string),
                "legacyMappingVersion": string, "serverAPIMappingVersion": string, "legacyError": string,
                "serverAPIError": string, "differences": array(ref("ComparisonDifference")),
                "account": string, "environment": string, "appVersion": string, "purchases": array(ref("ComparedPurchase")),
            ]),
            "CutoverImpact": object([
                "bundleId": string, "refusedByBoth": integer, "truncated": .object(["type": "boolean"]),
                "verdict": object(["ready": .object(["type": "boolean"]), "label": string, "environment": string,
                                   "unmet": array(string)]),
                "environments": array(object([
                    "environment": string, "ready": .object(["type": "boolean"]), "purchaseChains": integer,
                    "agreedChains": integer, "disagreeingChains": integer, "unexplainedFailures": integer,
                    "explainedFailures": integer, "accounts": integer,
                    "criteria": array(object(["met": .object(["type": "boolean"]), "text": string])),
                ])),
                "byProduct": array(object(["productId": string, "losesAccess": integer, "gainsAccess": integer,
                                           "differentExpiry": integer])),
                "accounts": array(object([
                    "change": .object(["type": "string", "enum": .array(MigrationReport.ImpactRow.Change.allCases.map { .string($0.rawValue) })]),
                    "environment": string, "account": string, "productId": string, "originalTransactionId": string,
                    "legacyState": string, "serverAPIState": string, "legacyExpiresDate": integer,
                    "serverAPIExpiresDate": integer, "comparisonId": string,
                ])),
            ]),
            "ComparedPurchase": object([
                "originalTransactionId": string, "productId": string, "productType": string,
                "legacyState": string, "legacyExpiresDate": integer, "serverAPIState": string, "serverAPIExpiresDate": integer,
                "agreed": .object(["type": "boolean"]),
            ]),
            "ComparisonDifference": object([
                "kind": .object(["type": "string", "enum": .array(ComparisonDifference.Kind.allCases.map { .string($0.rawValue) })]),
                "transactionId": string, "productId": string, "field": string,
                "legacyValue": .object(["type": "string", "description": "canonical JSON text; absent when the path lacks it"]),
                "serverAPIValue": .object(["type": "string", "description": "canonical JSON text; absent when the path lacks it"]),
            ]),
        ]
    }
}
