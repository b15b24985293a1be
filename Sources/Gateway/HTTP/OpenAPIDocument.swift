import Adapters
import IAPCore

/// What the OpenAPI document says of one route, declared with the route (`Route.all`). Path
/// parameters come from the route's path, the key requirement from its handler, and the refusals
/// a route gives for what it is rather than for what its endpoint does (`OpenAPIRefusal`) from
/// their owners; `responses` is the endpoint's own outcomes only.
struct OpenAPIOperation: Sendable {
    var summary: String
    var query: [QueryParameter] = []
    /// The schema of the JSON body the route takes, if it takes one.
    var requestBody: String?
    /// The endpoint asks Apple within the request's budget, so Apple's refusals are its answers too
    /// (`RequestBudgetMiddleware.refusals`).
    var callsApple = false
    /// By status code.
    var responses: [String: OpenAPIResponse]
}

/// A refusal a route gives because of a step of its chain or the kind of its handler: declared
/// once by what gives it, and documented for every route it applies to, ahead of the words the
/// route itself gives for the same status.
struct OpenAPIRefusal: Sendable {
    let status: String
    let description: String
    var headers: [String] = []
}

/// One documented answer of a route.
struct OpenAPIResponse: Sendable {
    let json: JSONValue
    /// The named schemas its body's schema refers to.
    var components: [String: JSONValue] = [:]

    /// 200 with a JSON body of `shape`: documented by the description that encodes it.
    static func ok<Value>(_ shape: JSONShape<Value>) -> OpenAPIResponse { json("OK", shape) }

    /// A JSON body of `shape`; `orError`: or the error envelope, whichever the answer is.
    static func json<Value>(_ description: String, _ shape: JSONShape<Value>, orError: Bool = false) -> OpenAPIResponse {
        let schema = orError ? .object(["oneOf": .array([shape.schema, OpenAPIDocument.ref("Error")])]) : shape.schema
        return OpenAPIResponse(json: .object(["description": .string(description),
                                              "content": .object(["application/json": .object(["schema": schema])])]),
                               components: shape.components)
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
                "schemas": .object(requestSchemas(evidence: evidence).merging(answerSchemas) { declared, _ in declared }),
            ]),
        ])
    }

    /// The named schemas of the routes' answers, from the descriptions that encode them.
    private static var answerSchemas: [String: JSONValue] {
        var schemas: [String: JSONValue] = ["Error": ErrorResponses.schema]
        for response in Route.all.flatMap(\.operation.responses.values) {
            schemas.merge(response.components) { first, _ in first }
        }
        return schemas
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
        }
        if !parameters.isEmpty { op["parameters"] = .array(parameters) }
        if let schema = declared.requestBody {
            op["requestBody"] = .object(["required": .bool(true),
                                         "content": .object(["application/json": .object(["schema": ref(schema)])])])
        }
        if route.requiresAppKey { op["security"] = .array([.object(["apiKey": .array([])])]) }
        var shared = refusals(route, readsInput: !parameters.isEmpty)
        shared.append(OpenAPIRefusal(status: "405", description: "another method on this path (METHOD_NOT_ALLOWED); Allow names this one",
                                     headers: ["Allow"]))
        // The shared words first, then the route's own for the same status, with the headers of both.
        for (status, refusals) in Dictionary(grouping: shared, by: \.status) {
            let own = responses[status]?.json
            let descriptions = refusals.map(\.description) + [own?["description"]?.stringValue].compactMap { $0 }
            let headers = Set(refusals.flatMap(\.headers) + (own?["headers"]?.objectValue.map { Array($0.keys) } ?? []))
            responses[status] = .error(descriptions.joined(separator: "; "), headers: headers.sorted())
        }
        op["responses"] = .object(responses.mapValues(\.json))
        return .object(op)
    }

    /// What `route` refuses for what it is, from the steps and kinds that refuse it, in the order a
    /// request meets them (the app's storage before what an `Idempotency-Key` adds to it).
    /// `readsInput`: it takes a parameter (in its path, query or headers).
    private static func refusals(_ route: Route, readsInput: Bool) -> [OpenAPIRefusal] {
        var refusals: [OpenAPIRefusal] = []
        if route.namesApp { refusals += AppLookup.refusals }
        if route.requiresAppKey { refusals += APIKeyAuthenticator.refusals }
        if readsInput || route.operation.requestBody != nil { refusals += RequestBody.refusals(takesBody: route.operation.requestBody != nil) }
        if route.takesSignedCall { refusals += Route.signedCallRefusals }
        if route.namesApp { refusals += Route.appDataRefusals }
        if route.takesIdempotencyKey { refusals += IdempotencyKeys.refusals }
        if route.operation.callsApple { refusals += RequestBudgetMiddleware.refusals }
        return refusals
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
    private static func array(_ items: JSONValue) -> JSONValue { .object(["type": "array", "items": items]) }

    /// The request bodies' schemas (the answers' come from their shapes, `answerSchemas`).
    private static func requestSchemas(evidence forms: [EvidenceForm]) -> [String: JSONValue] {
        [
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
            "RealtimeRequest": closedObject(["signedPayload": compactJWS], required: ["signedPayload"]),
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
            "Notification": .object([
                "description": "V2: {\"signedPayload\": JWS}; V1: Apple's legacy JSON with notification_type, password and unified_receipt",
                "oneOf": .array([
                    closedObject(["signedPayload": compactJWS], required: ["signedPayload"]),
                    closedObject(v1NotificationMembers, required: ["notification_type", "password", "unified_receipt"]),
                ]),
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
