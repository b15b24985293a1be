import HTTPServer
import IAPCore

/// How a refusal reads over HTTP: a stable code, an honest status, `Retry-After` where waiting helps.
///
/// The status says whose fault it is: 400 only for a request body the route cannot read (RequestBody
/// turns every fault in it into MALFORMED_REQUEST); 422 for evidence read and refused, its content
/// included (a duplicate key, a wrong type or a missing field inside a JWS payload or a receipt);
/// 5xx for the gateway's own side (500 configuration or an internal fault, 502 Apple answered
/// something unusable or refused our credentials, 503 Apple or storage unavailable).
enum ErrorResponses {
    static func status(for code: VerificationError.Code) -> Int {
        switch code {
        case .malformedRequest: 400
        case .unauthenticated: 401
        // Authenticated and well-formed, but the policy does not give this account this offer.
        case .offerNotAllowed: 403
        case .unknownApp, .notFound, .orderNotFound, .rolloutNotConfigured: 404
        case .methodNotAllowed: 405
        case .transactionBoundToOtherAccount, .idempotencyKeyInFlight, .rolloutConflict: 409
        case .inputTooLarge: 413
        case .invalidConfiguration, .invalidMapping, .internalError: 500
        // Apple refused our credentials or answered something unusable: not the client's evidence.
        case .upstreamCredentialsRejected, .upstreamInvalidResponse: 502
        case .upstreamUnavailable, .rateLimited, .storageUnavailable, .storageOutcomeUnknown, .revocationCheckUnavailable: 503
        default: 422  // the evidence was read and refused
        }
    }

    /// What a client is told. A 4xx message is about the client's own request or evidence and is
    /// passed on; a 5xx message is about the gateway's side (upstream hosts and URLs, libcurl's text,
    /// secret references and file paths, storage engine errors), so the client gets a plain sentence
    /// per code and the request id, and the full message goes to the log line with that id.
    static func clientMessage(for error: VerificationError, status: Int) -> String {
        guard status >= 500 else { return error.message }
        return switch error.code {
        case .invalidConfiguration, .invalidMapping:
            "the gateway's configuration cannot serve this request; an operator must fix it (see the log for this request id)"
        case .internalError: "the gateway failed internally; nothing was granted (see the log for this request id)"
        case .upstreamCredentialsRejected:
            "Apple refused the gateway's credentials for this app; an operator must fix its configuration"
        case .upstreamInvalidResponse: "Apple's answer could not be used; nothing was granted"
        case .upstreamUnavailable: "Apple cannot be reached now; try again later"
        case .rateLimited: "Apple asked the gateway to slow down; try again after Retry-After"
        case .storageUnavailable: "the gateway's storage is unavailable; nothing was granted; try again later"
        case .storageOutcomeUnknown:
            "the gateway's storage did not confirm the commit in time: it may have taken effect; retry with the same Idempotency-Key to learn"
        case .revocationCheckUnavailable: "the certificate revocation check cannot be made now; try again later"
        default: "the gateway cannot answer this request now"
        }
    }

    static func response(_ error: VerificationError, requestId: String) -> HTTPResponse {
        let status = status(for: error.code)
        var response = HTTPResponse.error(status, code: error.code.rawValue, message: clientMessage(for: error, status: status),
                                          retryable: error.retryable, requestId: requestId)
        // RFC 9110 §11.6.1: a 401 names the scheme that would be accepted.
        if status == 401 { response.headers.append(("WWW-Authenticate", "Bearer")) }
        if status == 503 || error.code == .idempotencyKeyInFlight {
            // Apple's own Retry-After where it gave one; otherwise a short, honest default.
            response.headers.append(("Retry-After", String(max(1, error.retryAfterSeconds ?? 5))))
        }
        return response
    }

    /// The envelope `HTTPResponse.error` writes, for every refusal of the gateway and of its HTTP
    /// server (a body too large, a request it cannot parse): the code is always one of the codes.
    static let schema: JSONValue = .object([
        "type": "object", "additionalProperties": .bool(false), "required": .array(["error"]),
        "properties": .object(["error": .object([
            "type": "object", "additionalProperties": .bool(false), "required": .array(["code", "message", "retryable"]),
            "properties": .object([
                "code": .object(["type": "string", "enum": .array(VerificationError.Code.all.map { .string($0.rawValue) })]),
                "message": .object(["type": "string"]),
                "retryable": .object(["type": "boolean"]),
                "requestId": .object(["type": "string",
                                      "description": "the X-Request-Id of this answer; the log line with the details carries it"]),
            ]),
        ])]),
    ])
}
