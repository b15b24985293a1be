/// What an upstream call was for, in words safe for metrics: a stable endpoint name chosen by the
/// caller ("verifyReceipt", "getTransactionInfo") and the environment ("production", "sandbox").
/// Never a URL, an id or a header: the observer sees only these two bounded strings.
public struct UpstreamCallLabel: Sendable, Equatable {
    public var endpoint: String
    public var environment: String

    public init(endpoint: String, environment: String) {
        self.endpoint = endpoint
        self.environment = environment
    }
}

/// How one call (one attempt; retries are separate calls) ended, as a bounded set of names.
public enum UpstreamCallOutcome: Sendable, Equatable {
    /// An HTTP answer arrived with this status (2xx is "ok"; the rest are reported by class).
    case answered(status: Int)
    case timeout
    /// Connect, TLS, framing or size failures: no usable answer.
    case transportError
    /// Refused by the client before any network activity (bad URL, header, configuration).
    case refused
    case cancelled

    public var label: String {
        switch self {
        case .answered(let status): (200..<300).contains(status) ? "ok" : "http_\(max(1, min(status / 100, 9)))xx"
        case .timeout: "timeout"
        case .transportError: "transport_error"
        case .refused: "refused"
        case .cancelled: "cancelled"
        }
    }

    init(_ error: UpstreamError) {
        switch error {
        case .timedOut: self = .timeout
        case .connectFailed, .tlsFailure, .responseTooLarge, .transport: self = .transportError
        case .invalidURL, .insecureScheme, .invalidHeader, .invalidConfiguration: self = .refused
        case .cancelled: self = .cancelled
        }
    }
}

/// Told about every labelled call `UpstreamHTTPClient` makes, once it has ended. The one seam for
/// upstream metrics: callers label requests, the gateway's metrics implement this.
public protocol UpstreamCallObserver: Sendable {
    func upstreamCallFinished(_ label: UpstreamCallLabel, outcome: UpstreamCallOutcome, duration: Duration)
}
