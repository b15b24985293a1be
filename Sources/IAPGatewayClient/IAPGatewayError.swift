import Foundation

/// Why a call did not produce an answer. `code` is the gateway's stable code (README, "Error
/// codes") when the gateway refused; the client's own failures have codes of their own.
public struct IAPGatewayError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The gateway answered with its error envelope: `code`, `status` and `requestId` are its.
        case refused
        /// No answer within the client's timeout (`code` TIMEOUT). The request may have been handled:
        /// calling again with the same `idempotencyKey` answers what it did (`newlyGranted` included).
        case timedOut
        /// The request did not complete (connection refused or reset, TLS failure; `code` TRANSPORT_FAILED).
        case transportFailed
        /// The client did not send the request: its settings or arguments cannot make one (`code` INVALID_REQUEST).
        case invalidRequest
        /// An answer that is not the gateway's (a proxy's error page, a body the client cannot read;
        /// `code` UNEXPECTED_ANSWER).
        case unexpectedAnswer
    }

    public let kind: Kind
    public let code: String
    public let message: String
    /// Whether the same call may succeed later (after `retryAfter`, when given).
    public let retryable: Bool
    /// The HTTP status, when there was an answer.
    public let status: Int?
    /// The answer's `Retry-After` (seconds or an HTTP date), when it has one.
    public let retryAfter: Duration?
    /// The gateway's request id: quote it to its operators, it names the gateway's log line.
    public let requestId: String?
    /// The client's own failures: the underlying cause (a transport's or decoder's text, which may
    /// name hosts or certificates), for the backend's log, never for an app's user.
    public let detail: String?

    public var description: String {
        "\(code)" + (status.map { " (HTTP \($0))" } ?? "") + ": \(message)" + (requestId.map { " [request \($0)]" } ?? "")
    }

    init(kind: Kind, code: String, message: String, retryable: Bool, status: Int?, retryAfter: Duration?,
         requestId: String?, detail: String? = nil) {
        self.kind = kind
        self.code = code
        self.message = message
        self.retryable = retryable
        self.status = status
        self.retryAfter = retryAfter
        self.requestId = requestId
        self.detail = detail
    }

    static func client(_ kind: Kind, _ message: String, status: Int? = nil, retryAfter: Duration? = nil,
                       retryable: Bool, detail: String? = nil) -> IAPGatewayError {
        let code = switch kind {
        case .timedOut: "TIMEOUT"
        case .transportFailed: "TRANSPORT_FAILED"
        case .invalidRequest: "INVALID_REQUEST"
        case .unexpectedAnswer, .refused: "UNEXPECTED_ANSWER"
        }
        return IAPGatewayError(kind: kind, code: code, message: message, retryable: retryable, status: status,
                               retryAfter: retryAfter, requestId: nil, detail: detail)
    }
}

/// `Retry-After` as RFC 9110 §10.2.3 has it: delta-seconds or an IMF-fixdate.
func retryAfter(_ value: String?, now: Date = Date()) -> Duration? {
    guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
    if value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) { return Int64(value).map { .seconds($0) } }
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    guard let date = formatter.date(from: value) else { return nil }
    return .seconds(max(0, Int64(date.timeIntervalSince(now).rounded(.up))))
}
