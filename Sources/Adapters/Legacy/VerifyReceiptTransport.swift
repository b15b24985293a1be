import IAPCore
import UpstreamHTTP

/// The one thing the legacy adapter needs from HTTP: send a request, get an answer. `UpstreamHTTPClient`
/// is the production conformer; tests may substitute their own.
public protocol VerifyReceiptTransport: Sendable {
    func send(_ request: UpstreamRequest) async throws(UpstreamError) -> UpstreamResponse
}

extension UpstreamHTTPClient: VerifyReceiptTransport {}

/// One verifyReceipt answer that parsed: Apple's status and the whole JSON document.
struct VerifyReceiptAnswer {
    let status: Int64
    let json: JSONValue
}

/// One POST to one verifyReceipt URL, retried under the policy for transport failures, HTTP 429/5xx,
/// non-JSON bodies (Apple answers HTML during outages) and Apple's temporary statuses.
struct VerifyReceiptExchange {
    let transport: any VerifyReceiptTransport
    let retryPolicy: RetryPolicy
    let sleep: RetryPolicy.Sleep
    let maxResponseBytes: Int
    let logger: Logger

    func post(_ body: [UInt8], to environment: AppStoreEnvironment, url: String) async throws(VerificationError)
        -> VerifyReceiptAnswer {
        let request = UpstreamRequest(method: "POST", url: url,
                                      headers: [("Content-Type", "application/json"), ("Accept", "application/json")],
                                      body: body,
                                      label: UpstreamCallLabel(endpoint: "verifyReceipt",
                                                               environment: environment == .sandbox ? "sandbox" : "production"))
        do {
            return try await retryPolicy.run(sleep: sleep) { attempt in
                let decision = await attemptOnce(request)
                if case .retry(let error, _) = decision {
                    logger.warning("verify_receipt_attempt_failed",
                                   ["environment": environment.rawValue, "attempt": String(attempt),
                                    "code": error.code.rawValue, "reason": error.message])
                }
                return decision
            }
        } catch {
            let last = error.lastError
            let retryAfter = error.retryAfter.map { Int($0.components.seconds) } ?? last.retryAfterSeconds
            throw VerificationError(last.code, "\(last.message) (\(error.attempts) attempt(s) to \(environment.rawValue))",
                                    retryAfterSeconds: retryAfter)
        }
    }

    private func attemptOnce(_ request: UpstreamRequest) async -> RetryDecision<VerifyReceiptAnswer, VerificationError> {
        let response: UpstreamResponse
        do {
            response = try await transport.send(request)
        } catch {
            return Self.decision(for: error)
        }
        switch response.status {
        case 200:
            break
        case 429:
            let seconds = response.retryAfterSeconds
            return .retry(VerificationError(.rateLimited, "verifyReceipt answered HTTP 429", retryAfterSeconds: seconds),
                          retryAfter: seconds.map { .seconds($0) })
        case 500...599:
            let seconds = response.retryAfterSeconds
            return .retry(VerificationError(.upstreamUnavailable, "verifyReceipt answered HTTP \(response.status)",
                                            retryAfterSeconds: seconds),
                          retryAfter: seconds.map { .seconds($0) })
        default:
            return .fail(VerificationError(.upstreamUnavailable, "verifyReceipt answered HTTP \(response.status)"))
        }
        guard response.body.count <= maxResponseBytes else {
            return .fail(VerificationError(.upstreamUnavailable,
                                           "verifyReceipt answer is larger than \(maxResponseBytes) bytes"))
        }
        let json: JSONValue
        do throws(VerificationError) {
            json = try StrictJSON(maxBytes: maxResponseBytes).parse(response.body)
        } catch {
            // Apple answers HTML during outages: not JSON is "unavailable", worth another attempt.
            // Never the body itself: it may hold the receipt. The parser's code says what was wrong.
            return .retry(VerificationError(.upstreamUnavailable, "verifyReceipt answer is not a JSON document (\(error.code))"))
        }
        let status: Int64
        let retryable: Bool
        do throws(VerificationError) {
            let fields = try JSONFields(json, context: "verifyReceipt response")
            guard let s = try fields.int64("status") else {
                throw VerificationError(.missingField, "verifyReceipt response has no status")
            }
            status = s
            retryable = try fields.bool("is-retryable") ?? false
        } catch {
            // JSON, but not Apple's shape: upstream's fault, and asking again would get the same.
            return .fail(VerificationError(.upstreamInvalidResponse, "verifyReceipt answer: \(error.message)"))
        }
        if status != 0, retryable || VerifyReceiptStatus(status) == .temporary {
            return .retry(VerificationError(.upstreamUnavailable, "verifyReceipt answered temporary status \(status)"))
        }
        return .success(VerifyReceiptAnswer(status: status, json: json))
    }

    private static func decision(for error: UpstreamError) -> RetryDecision<VerifyReceiptAnswer, VerificationError> {
        switch error {
        case .connectFailed, .timedOut, .transport:
            return .retry(VerificationError(.upstreamUnavailable, "verifyReceipt unreachable: \(describe(error))"))
        case .invalidURL, .insecureScheme, .invalidHeader, .invalidConfiguration:
            return .fail(VerificationError(.invalidConfiguration, "verifyReceipt URL or request refused: \(describe(error))"))
        case .tlsFailure, .responseTooLarge, .cancelled:
            return .fail(VerificationError(.upstreamUnavailable, "verifyReceipt exchange failed: \(describe(error))"))
        }
    }

    /// UpstreamError's cases carry curl's reason or a host, never a header or body.
    private static func describe(_ error: UpstreamError) -> String {
        switch error {
        case .invalidURL(let reason): "invalid URL (\(reason))"
        case .insecureScheme(let host): "plain http to non-loopback host \(host)"
        case .invalidHeader(let name): "invalid header \(name)"
        case .invalidConfiguration(let reason): "client configuration (\(reason))"
        case .connectFailed(let reason): "connect failed (\(reason))"
        case .timedOut: "timed out"
        case .tlsFailure(let reason): "TLS failure (\(reason))"
        case .responseTooLarge(let limit): "answer larger than \(limit) bytes"
        case .transport(let reason): "transport error (\(reason))"
        case .cancelled: "cancelled"
        }
    }
}
