/// One outgoing HTTP request. Header values (Authorization included) never reach errors or logs.
public struct UpstreamRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(String, String)]
    public var body: [UInt8]?
    /// Names the call for the client's observer (metrics); unlabelled calls are not observed.
    public var label: UpstreamCallLabel?

    public init(method: String = "GET", url: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
                label: UpstreamCallLabel? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.label = label
    }
}

public struct UpstreamResponse: Sendable {
    public var status: Int
    /// Lower-cased names; repeated headers are joined with ", " as RFC 9110 allows.
    public var headers: [String: String]
    public var body: [UInt8]

    public init(status: Int, headers: [String: String], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// Retry-After as whole seconds from now (delta-seconds or HTTP-date); nil when absent or malformed.
    public var retryAfterSeconds: Int? { retryAfterSeconds(nowUnixTime: HTTPDate.currentUnixTime()) }

    /// The same, against a given wall-clock time (seconds since 1970), so tests need no real clock.
    public func retryAfterSeconds(nowUnixTime: Double) -> Int? {
        guard let value = headers["retry-after"] else { return nil }
        return RetryAfter.seconds(from: value, nowUnixTime: nowUnixTime)
    }

    /// Retry-After as a Duration, the form `RetryDecision.retry(_:retryAfter:)` takes.
    public var retryAfter: Duration? { retryAfterSeconds.map { .seconds($0) } }
}

public enum UpstreamError: Error, Sendable, Equatable {
    /// The URL could not be parsed or uses a scheme other than http/https. Carries the reason, not the URL.
    case invalidURL(String)
    /// Plain http:// to a host that is not loopback; refused before any network activity.
    case insecureScheme(host: String)
    /// A header name or value that would break the request framing (CR, LF, NUL, or a bad name).
    case invalidHeader(name: String)
    case invalidConfiguration(String)
    case connectFailed(String)
    case timedOut
    case tlsFailure(String)
    /// The response exceeded the configured limit (the limit, in bytes); the transfer was aborted.
    case responseTooLarge(Int)
    case transport(String)
    /// The calling task was cancelled; the transfer was aborted.
    case cancelled

    /// Whether trying the same request again may succeed (a fresh connection, an upstream that recovered).
    public var isRetryable: Bool {
        switch self {
        case .connectFailed, .timedOut, .transport: return true
        case .invalidURL, .insecureScheme, .invalidHeader, .invalidConfiguration, .tlsFailure,
             .responseTooLarge, .cancelled:
            return false
        }
    }
}

public struct UpstreamHTTPConfiguration: Sendable {
    public var connectTimeout: Duration
    /// The whole exchange, connect included.
    public var requestTimeout: Duration
    public var maxResponseBytes: Int
    public var maxConnectionsPerHost: Int
    /// PEM bundle that replaces the system store entirely; nil trusts the system CA store.
    public var caBundlePath: String?
    public var userAgent: String
    /// Plain http to any host, not only to loopback. Only for a client whose answers are verified
    /// on their own whoever carries them: OCSP responses are signed and served over http by design
    /// (RFC 6960, Apple's responders included). Off by default.
    public var allowsPlainHTTPToAnyHost: Bool

    public init(connectTimeout: Duration = .seconds(5), requestTimeout: Duration = .seconds(15),
                maxResponseBytes: Int = 4 << 20, maxConnectionsPerHost: Int = 8,
                caBundlePath: String? = nil, userAgent: String = "IAPGateway/1", allowsPlainHTTPToAnyHost: Bool = false) {
        self.connectTimeout = connectTimeout
        self.requestTimeout = requestTimeout
        self.maxResponseBytes = maxResponseBytes
        self.maxConnectionsPerHost = maxConnectionsPerHost
        self.caBundlePath = caBundlePath
        self.userAgent = userAgent
        self.allowsPlainHTTPToAnyHost = allowsPlainHTTPToAnyHost
    }
}

extension Duration {
    /// Milliseconds rounded up, so a sub-millisecond timeout never becomes curl's "0 = no timeout".
    var wholeMillisecondsRoundedUp: Int {
        let (seconds, attoseconds) = components
        let extra = attoseconds > 0 ? (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000 : 0
        return Int(seconds) * 1000 + Int(extra)
    }
}
