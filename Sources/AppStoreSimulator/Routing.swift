import Foundation
import HTTPServer
import IAPCore

extension AppStoreSimulator {
    /// Dispatches on the first path segment: `production` / `sandbox` (Apple's surface, faults apply)
    /// or `admin` (the simulator's own control surface, never faulted).
    func handle(_ request: HTTPRequest) async -> HTTPResponse {
        guard let segments = request.pathSegments, let first = segments.first else {
            return .json(404, "{\"errorCode\":4040000,\"errorMessage\":\"Not found.\"}")
        }
        let rest = Array(segments.dropFirst())
        switch first {
        case "admin":
            return await handleAdmin(request, rest)
        case "production", "sandbox":
            let environment: AppStoreEnvironment = first == "production" ? .production : .sandbox
            let isVerifyReceipt = rest == ["verifyReceipt"]
            let decision = faults.decide(for: environment == .production ? .production : .sandbox)
            if decision.latency > 0 { try? await Task.sleep(for: .milliseconds(decision.latency)) }
            switch decision.action {
            case .none:
                break
            case .hang(let ms):
                try? await Task.sleep(for: .milliseconds(ms))
                return HTTPResponse(status: 503)
            case .rateLimit(let seconds):
                let headers = [("Retry-After", String(seconds)), ("Content-Type", "application/json")]
                let body = isVerifyReceipt ? "{\"status\":21005}" : ServerAPIError.rateLimitExceeded.body
                return HTTPResponse(status: 429, headers: headers, body: Array(body.utf8))
            case .fail:
                if isVerifyReceipt {
                    switch decision.receiptFailure {
                    case .http503: return HTTPResponse(status: 503)
                    case .status(let status): return .json(200, VerifyReceiptHandler.statusOnly(status, environment: environment))
                    }
                }
                return ServerAPIError.generalInternalRetryable.response
            }
            if isVerifyReceipt {
                guard request.method == "POST" else { return .json(200, "{\"status\":21000}") }
                return VerifyReceiptHandler(simulator: self, environment: environment).handle(request)
            }
            return await handleServerAPI(request, environment: environment, rest)
        default:
            return .json(404, "{\"errorCode\":4040000,\"errorMessage\":\"Not found.\"}")
        }
    }
}

/// Apple's Server API error bodies: `{"errorCode": N, "errorMessage": "..."}` with its HTTP status.
struct ServerAPIError: Error, Sendable {
    let status: Int
    let code: Int64
    let message: String

    static let generalBadRequest = ServerAPIError(status: 400, code: 4000000, message: "Bad request.")
    static let invalidTransactionId = ServerAPIError(status: 400, code: 4000006, message: "Invalid transaction id.")
    static let invalidOriginalTransactionId = ServerAPIError(status: 400, code: 4000008, message: "Invalid original transaction id.")
    static let invalidRevision = ServerAPIError(status: 400, code: 4000005, message: "Invalid request revision.")
    static let invalidAppAccountToken = ServerAPIError(status: 400, code: 4000183, message: "Invalid appAccountToken.")
    static let unauthenticated = ServerAPIError(status: 401, code: 0, message: "Unauthenticated")
    static let transactionIdNotFound = ServerAPIError(status: 404, code: 4040010, message: "Transaction id not found.")
    static let originalTransactionIdNotFound = ServerAPIError(status: 404, code: 4040005, message: "Original transaction id not found.")
    static let rateLimitExceeded = ServerAPIError(status: 429, code: 4290000, message: "Rate limit exceeded.")
    static let generalInternalRetryable = ServerAPIError(status: 500, code: 5000001, message: "An unknown error occurred. Please try again.")

    var body: String {
        JSONValue.object(["errorCode": .int(code), "errorMessage": .string(message)]).jsonText
    }

    /// 401 has no JSON body at Apple; the rest carry the error object.
    var response: HTTPResponse {
        status == 401 ? HTTPResponse(status: 401, headers: [("Content-Type", "text/plain")], body: Array("Unauthenticated\n".utf8))
            : .json(status, body)
    }
}
