import Adapters
import IAPCore

/// What the OpenAPI document says of one route, declared with the route (`Route.all`). Path
/// parameters come from the route's path, the key requirement from its handler, and the answers
/// every route shares (400/401/404 of a keyed route, 405) from `OpenAPIDocument`.
struct OpenAPIOperation: Sendable {
    var summary: String
    var query: [QueryParameter] = []
    /// The schema of the JSON body the route takes, if it takes one.
    var requestBody: String?
    /// By status code.
    var responses: [String: OpenAPIResponse]
}

/// One documented answer of a route.
struct OpenAPIResponse: Sendable {
    let json: JSONValue

    /// 200 with a JSON body of the schema.
    static func ok(_ schema: String) -> OpenAPIResponse {
        OpenAPIResponse(json: .object(["description": "OK",
                                       "content": .object(["application/json": .object(["schema": OpenAPIDocument.ref(schema)])])]))
    }

    /// An error answer (the `Error` schema), with the headers it carries.
    static func error(_ description: String, headers: [String] = []) -> OpenAPIResponse {
        var response: [String: JSONValue] = [
            "description": .string(description),
            "content": .object(["application/json": .object(["schema": OpenAPIDocument.ref("Error")])]),
        ]
        if !headers.isEmpty {
            response["headers"] = .object(Dictionary(uniqueKeysWithValues: headers.map { ($0, .object(["schema": OpenAPIDocument.string])) }))
        }
        return OpenAPIResponse(json: .object(response))
    }

    /// Any other answer, written out.
    static func object(_ fields: [String: JSONValue]) -> OpenAPIResponse { OpenAPIResponse(json: .object(fields)) }
}

/// The OpenAPI 3 description of the gateway's API, built from `Route.all`, so every documented
/// path is a real route, described by the declaration the dispatcher runs.
enum OpenAPIDocument {
    /// `evidence`: the registered adapters' forms, which the verify request's schema lists.
    static func json(evidence: [EvidenceForm]) -> String { document(evidence: evidence).jsonText }

    static func document(evidence: [EvidenceForm]) -> JSONValue {
        var paths: [String: JSONValue] = [:]
        for route in Route.all {
            var operations = paths[route.path]?.objectValue ?? [:]
            operations[route.method.lowercased()] = operation(route)
            paths[route.path] = .object(operations)
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

    private static func operation(_ route: Route) -> JSONValue {
        let declared = route.operation
        var op: [String: JSONValue] = ["summary": .string(declared.summary)]
        var parameters: [JSONValue] = []
        for segment in route.path.split(separator: "/") where segment.hasPrefix("{") {
            let name = String(segment.dropFirst().dropLast())
            parameters.append(.object(["name": .string(name), "in": "path", "required": .bool(true),
                                       "schema": pathSchemas[name] ?? .object(["type": "string", "minLength": .int(1)])]))
        }
        parameters += declared.query.map(\.openAPI)
        var responses = declared.responses
        if route.takesIdempotencyKey {
            parameters.append(.object([
                "name": .string(IdempotencyKeys.header), "in": "header", "required": .bool(false),
                "description": "1-255 printable ASCII characters, one per logical call: a retry with the same key and request gets the first completed answer again (Idempotent-Replayed: true), kept at least 24 h",
                "schema": .object(["type": "string", "minLength": .int(1), "maxLength": .int(Int64(IdempotencyKeys.maxKeyLength)),
                                   "pattern": "^[ -~]+$"]),
            ]))
            if case .object(var ok)? = responses["200"]?.json {
                ok["headers"] = .object([IdempotencyKeys.replayedHeader: .object([
                    "description": "true: this is the stored answer of an earlier request with the same Idempotency-Key",
                    "schema": .object(["type": "string", "enum": .array(["true"])])])])
                responses["200"] = .object(ok)
            }
            // Beside what the route declares for the same status.
            func adding(_ status: String, _ description: String, headers: [String] = []) {
                let declared = responses[status]?.json["description"]?.stringValue
                responses[status] = .error([declared, description].compactMap { $0 }.joined(separator: "; "), headers: headers)
            }
            adding("409", "a request with the same Idempotency-Key is still being answered (IDEMPOTENCY_KEY_IN_FLIGHT); see Retry-After",
                   headers: ["Retry-After"])
            adding("422", "the Idempotency-Key was first sent with another request (IDEMPOTENCY_KEY_REUSED)")
        }
        if !parameters.isEmpty { op["parameters"] = .array(parameters) }
        if let schema = declared.requestBody {
            op["requestBody"] = .object(["required": .bool(true),
                                         "content": .object(["application/json": .object(["schema": ref(schema)])])])
        }
        if route.requiresAppKey {
            op["security"] = .array([.object(["apiKey": .array([])])])
            responses["400"] = .error("a request the route cannot read (MALFORMED_REQUEST)")
            responses["401"] = .error("missing or wrong API key (UNAUTHENTICATED); WWW-Authenticate: Bearer",
                                      headers: ["WWW-Authenticate"])
            responses["404"] = .error("unknown app (UNKNOWN_APP)")
        }
        responses["405"] = .error("another method on this path (METHOD_NOT_ALLOWED); Allow names this one", headers: ["Allow"])
        op["responses"] = .object(responses.mapValues(\.json))
        return .object(op)
    }

    /// A V1 notification's members as Apple documents them (responseBodyV1): strings, but for
    /// `expiration_intent` and the `unified_receipt` verifyReceipt's answer nests.
    private static var v1NotificationMembers: [String: JSONValue] {
        var members: [String: JSONValue] = [:]
        for name in ["auto_renew_adam_id", "auto_renew_product_id", "auto_renew_status", "auto_renew_status_change_date",
                     "auto_renew_status_change_date_ms", "auto_renew_status_change_date_pst", "bid", "bvrs", "environment",
                     "notification_type", "original_transaction_id", "password"] {
            members[name] = text
        }
        members["expiration_intent"] = .object(["type": "integer", "minimum": .int(0), "maximum": .int(Int64(Int32.max))])
        let records = array(.object(["type": "object", "additionalProperties": string]))
        members["unified_receipt"] = closedObject(["environment": text, "latest_receipt": text, "status": .object(["type": "integer", "minimum": .int(0), "maximum": .int(99_999)]),
                                                   "latest_receipt_info": records, "pending_renewal_info": records], required: [])
        return members
    }

    /// Path parameters the server checks beyond being there, by name.
    private static let pathSchemas: [String: JSONValue] = [
        "account": RequestBody.accountSchema,
        "orderId": .object(["type": "string", "pattern": .string(AppStoreServerAPIClient.orderIdPattern)]),
    ]

    static func ref(_ name: String) -> JSONValue { .object(["$ref": .string("#/components/schemas/\(name)")]) }

    private static func object(_ properties: [String: JSONValue], required: [String] = []) -> JSONValue {
        var o: [String: JSONValue] = ["type": "object", "properties": .object(properties)]
        if !required.isEmpty { o["required"] = .array(required.map(JSONValue.string)) }
        return .object(o)
    }

    /// A request body's object: the server refuses any member it does not name (400).
    private static func closedObject(_ properties: [String: JSONValue], required: [String]) -> JSONValue {
        var o = object(properties, required: required).objectValue ?? [:]
        o["additionalProperties"] = .bool(false)
        return .object(o)
    }

    /// A non-empty string.
    private static let text: JSONValue = .object(["type": "string", "minLength": .int(1)])
    private static let compactJWS = EvidenceForm.compactJWSSchema
    static let string: JSONValue = .object(["type": "string"])
    private static let integer: JSONValue = .object(["type": "integer", "format": "int64"])
    /// A path's state in a cutover impact row: an entitlement state, or notFound where its answer lacks the chain.
    private static let impactState: JSONValue = .object([
        "type": "string",
        "enum": .array((Entitlement.State.allCases.map(\.rawValue) + [MigrationReport.ImpactRow.notFound]).map(JSONValue.string)),
        "description": "the entitlement this path would answer; notFound: its answer lacks the purchase chain (a purchase the Server API does not know)",
    ])
    private static func array(_ items: JSONValue) -> JSONValue { .object(["type": "array", "items": items]) }

    private static func schemas(evidence forms: [EvidenceForm]) -> [String: JSONValue] {
        [
            "Status": object(["status": string]),
            "Error": object(["error": object(["code": string, "message": string, "retryable": .object(["type": "boolean"]),
                                              "requestId": .object(["type": "string", "description": "the X-Request-Id of this answer; the log line with the details carries it"])],
                                             required: ["code", "message", "retryable"])], required: ["error"]),
            "NonceRequest": closedObject(["account": RequestBody.accountSchema], required: ["account"]),
            "OfferSignatureRequest": .object([
                "description": "account and productId plus either promotionalOffer (an offer id) with format v1 or v2, or introductoryOfferEligibility",
                "oneOf": .array([
                    closedObject(["account": RequestBody.accountSchema, "productId": text, "promotionalOffer": text,
                                  "format": .object(["type": "string", "enum": .array(["v1", "v2"])])],
                                 required: ["account", "productId", "promotionalOffer", "format"]),
                    closedObject(["account": RequestBody.accountSchema, "productId": text,
                                  "introductoryOfferEligibility": .object(["type": "boolean"])],
                                 required: ["account", "productId", "introductoryOfferEligibility"]),
                ]),
            ]),
            "OfferSignature": .object([
                "description": "v1: StoreKit 1's SKPaymentDiscount values (signature: base64 DER ECDSA P-256); v2 and introductoryOfferEligibility: a compact JWS for StoreKit 2",
                "type": "object",
                "properties": .object(["format": .object(["type": "string", "enum": .array(["v1", "v2", "introductoryOfferEligibility"])]),
                                       "keyIdentifier": string, "nonce": string, "timestamp": integer, "signature": string]),
                "required": .array(["format", "signature"]),
            ]),
            "RealtimeRequest": closedObject(["signedPayload": compactJWS], required: ["signedPayload"]),
            "RealtimeResponse": .object([
                "description": "Apple's RealtimeResponseBody: at most one of message, alternateProduct, promotionalOffer (a v2 JWS); {} lets Apple show the default message",
                "type": "object",
                "properties": .object([
                    "message": object(["messageIdentifier": string]),
                    "alternateProduct": object(["messageIdentifier": string, "productId": string]),
                    "promotionalOffer": object(["messageIdentifier": string, "promotionalOfferSignatureV2": string]),
                ]),
            ]),
            "Nonce": object(["nonce": string, "expiresAt": integer]),
            "VerifyRequest": .object([
                "description": .string("account plus exactly one of: " + forms.map { form in
                    form.member + (form.companions.isEmpty ? "" : " (with " + form.companions.joined(separator: ", ") + ")")
                        + ": " + form.summary
                }.joined(separator: "; ")),
                "oneOf": .array(forms.map { form in
                    var members = ["account": RequestBody.accountSchema, form.member: form.memberSchema]
                    for companion in form.companions { members[companion] = text }
                    return closedObject(members, required: ["account", form.member])
                }),
            ]),
            "VerifyResponse": object([
                "account": string,
                "verdict": .object(["type": "string", "enum": .array(VerifyVerdict.allCases.map { .string($0.rawValue) }),
                                    "description": "granted: at least one purchase of the evidence grants access now, or is a consumable (credited: credit it for newlyGranted only); notGranted: genuine and bound to the account, but nothing grants access now. Evidence whose presented purchases are all refunded or revoked is refused instead (422 TRANSACTION_REVOKED)."]),
                "adapter": string, "environment": string, "mappingVersion": string,
                "transactions": array(.object(["type": "object", "description": "CanonicalTransaction (Apple's names; mappingVersion says which mapping made it)"])),
                "renewals": array(.object(["type": "object", "description": "CanonicalRenewal: each subscription chain's renewal info"])),
                "newlyGranted": array(string), "alreadyGranted": array(string), "revoked": array(string),
                "entitlements": array(ref("Entitlement")),
                "appTransaction": .object(["type": "object",
                                           "description": "app-transaction evidence only: the verified AppTransaction (CanonicalAppTransaction)"]),
                "grandfathered": .object(["type": "boolean",
                                          "description": "app-transaction evidence, and receipts of apps with a grandfathering rule: whether the rule granted its products"]),
            ]),
            "Entitlement": object(["productId": string,
                                   "state": .object(["type": "string",
                                                     "enum": .array(Entitlement.State.allCases.map { .string($0.rawValue) }),
                                                     "description": .string("as it stands at the answer's time (dates judged with a \(EntitlementAccess.clockSkewAllowanceMillis) ms clock-skew allowance); credited: a consumable, credited once (newlyGranted) and never lasting access (grantsAccess false; refunded after a refund)")]),
                                   "originalTransactionId": string,
                                   "expiresDate": .object(["type": "integer", "format": "int64",
                                                           "description": "end of the state's period (in grace: the grace period's end)"]),
                                   "commitmentExpiresDate": .object(["type": "integer", "format": "int64",
                                                                     "description": "a monthly plan with a commitment: when the commitment ends (access follows expiresDate)"]),
                                   "source": string, "grantsAccess": .object(["type": "boolean"])]),
            "Entitlements": object(["account": string, "entitlements": array(ref("Entitlement"))]),
            "History": object([
                "bundleId": string, "account": string, "truncated": .object(["type": "boolean"]),
                "attempts": array(object([
                    "time": integer, "requestId": string, "evidenceKind": string,
                    "evidenceSHA256Prefix": .object(["type": "string", "description": "the first 16 hex digits of the evidence's SHA-256; the evidence itself is never kept"]),
                    "clientVersion": .object(["type": "string", "description": "the app backend's X-Client-Version header, at most 64 printable ASCII characters (quotes, backslashes, apostrophes, backticks and markup as ?)"]),
                    "environment": string,
                    "appleStatus": .object(["type": "string", "description": "what Apple answered, in order: verifyReceipt statuses (\"21007 0\") or Server API failures (\"HTTP 404 errorCode 4040010\")"]),
                    "verdict": .object(["type": "string", "enum": .array(["granted", "notGranted", "refused"]),
                                         "description": "what the attempt was answered: the 200's verdict (granted, notGranted), or refused with code"]),
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
            "OrderLookup": object([
                "bundleId": string, "orderId": string,
                "environment": .object(["type": "string", "description": "where Apple knew the order (Production asked first)"]),
                "mappingVersion": string,
                "transactions": array(object([
                    "transaction": .object(["type": "object", "description": "CanonicalTransaction, verified like any other JWS (pinned roots, chain, ES256, the app's bundle, app id and environments)"]),
                    "owner": .object(["type": "string", "description": "the account of this gateway its purchase chain is bound to; absent when none is"]),
                ])),
                "accounts": array(.object(["allOf": .array([ref("History")]),
                                           "description": "each owner's history, once per account, as GET …/accounts/{account}/history answers it"])),
            ]),
            "Notification": .object([
                "description": "V2: {\"signedPayload\": JWS}; V1: Apple's legacy JSON with notification_type, password and unified_receipt",
                "oneOf": .array([
                    closedObject(["signedPayload": compactJWS], required: ["signedPayload"]),
                    closedObject(v1NotificationMembers, required: ["notification_type", "password", "unified_receipt"]),
                ]),
            ]),
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
                    "legacyState": impactState, "serverAPIState": impactState, "legacyExpiresDate": integer,
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

extension OpenAPIDocument: RouteDeclaring {
    static let routes: [Route] = [
        Route(method: "GET", path: "/openapi.json", name: "openapi",
              operation: OpenAPIOperation(summary: "This document",
                                          responses: ["200": .object(["description": "OpenAPI 3 document"])]),
              handler: .open { endpoints, _, _ in .json(200, endpoints.openAPI) }),
    ]
}
