import HTTPServer
import IAPCore

/// How a refusal reads over HTTP: a stable code, an honest status, `Retry-After` where waiting helps.
enum ErrorResponses {
    static func status(for code: VerificationError.Code) -> Int {
        switch code {
        case .malformedRequest, .malformedJSON, .duplicateJSONKey, .invalidFieldType, .missingField: 400
        case .unauthenticated: 401
        case .unknownApp, .notFound: 404
        case .methodNotAllowed: 405
        case .transactionBoundToOtherAccount: 409
        case .inputTooLarge: 413
        case .invalidConfiguration, .invalidMapping: 500
        // Apple refused our credentials: the gateway is misconfigured, not the client's evidence.
        case .upstreamCredentialsRejected: 502
        case .upstreamUnavailable, .rateLimited, .storageUnavailable, .revocationCheckUnavailable: 503
        default: 422  // the evidence was read and refused
        }
    }

    static func response(_ error: VerificationError, requestId: String) -> HTTPResponse {
        let status = status(for: error.code)
        var response = HTTPResponse.error(status, code: error.code.rawValue, message: error.message,
                                          retryable: error.retryable)
        // RFC 9110 §11.6.1: a 401 names the scheme that would be accepted.
        if status == 401 { response.headers.append(("WWW-Authenticate", "Bearer")) }
        if status == 503 {
            // Apple's own Retry-After where it gave one; otherwise a short, honest default.
            response.headers.append(("Retry-After", String(max(1, error.retryAfterSeconds ?? 5))))
        }
        return response
    }
}
