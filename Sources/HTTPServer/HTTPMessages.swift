import IAPCore

/// Request and response values handed to and returned by an `HTTPHandler`.
///
/// They are plain values so a handler can be tested by calling it directly, without a socket.

/// Header fields in arrival order; lookup ignores ASCII case, as HTTP field names do.
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var fields: [(name: String, value: String)]

    public init(_ fields: [(name: String, value: String)] = []) { self.fields = fields }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.fields = elements.map { (name: $0.0, value: $0.1) }
    }

    public mutating func add(name: String, value: String) { fields.append((name: name, value: value)) }

    /// The first value of the field, or nil when absent.
    public subscript(name: String) -> String? {
        fields.first { Self.sameName($0.name, name) }?.value
    }

    /// Every value of a repeated field, in arrival order.
    public func values(for name: String) -> [String] {
        fields.filter { Self.sameName($0.name, name) }.map(\.value)
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

    static func sameName(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a.lowercased() == b.lowercased()
    }
}

public struct HTTPRequest: Sendable {
    public var method: String
    /// The path exactly as the client sent it (still percent-encoded), without the query.
    public var path: String
    /// Percent-decoded query parameters; for a repeated name the first occurrence wins.
    public var query: [String: String]
    public var headers: HTTPHeaders
    public var body: [UInt8]
    public var remoteAddress: String
    /// The client's `X-Request-Id` when it is `[A-Za-z0-9._-]{1,64}`, otherwise one made here.
    public var requestId: String

    public init(method: String, path: String, query: [String: String] = [:], headers: HTTPHeaders = HTTPHeaders(),
                body: [UInt8] = [], remoteAddress: String = "127.0.0.1", requestId: String? = nil) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
        self.requestId = RequestID.accepting(requestId ?? headers["X-Request-Id"])
    }

    /// The path split on `/` with empty segments dropped, each percent-decoded.
    /// Nil when a segment has a broken escape or decodes to invalid UTF-8, so routing can refuse it
    /// rather than guess; an encoded `/` (`%2F`) stays inside its segment.
    public var pathSegments: [String]? {
        var segments: [String] = []
        for raw in path.split(separator: "/", omittingEmptySubsequences: true) {
            guard let decoded = PercentDecoding.decode(Substring(raw), plusIsSpace: false) else { return nil }
            segments.append(decoded)
        }
        return segments
    }
}

public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// Every JSON answer is about one client's request (entitlements, verdicts, refusals): never cached.
    public static func json(_ status: Int, _ text: String) -> HTTPResponse { json(status, bytes: Array(text.utf8)) }

    /// JSON already written as UTF-8 bytes (the answer's writer's own buffer, not copied again).
    public static func json(_ status: Int, bytes: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
                     body: bytes)
    }

    /// The gateway's error envelope: `{"error":{"code":…,"message":…,"retryable":…[,"requestId":…]}}`
    /// (the request id where the caller passes one, so a client can quote it to an operator).
    public static func error(_ status: Int, code: String, message: String, retryable: Bool = false,
                             requestId: String? = nil) -> HTTPResponse {
        json(status, "{\"error\":{\"code\":\(jsonString(code)),\"message\":\(jsonString(message)),"
            + "\"retryable\":\(retryable)" + (requestId.map { ",\"requestId\":\(jsonString($0))" } ?? "") + "}}")
    }

    /// A JSON string literal, escaped as every answer of the gateway is (`JSONValue.jsonText`).
    static func jsonString(_ text: String) -> String { JSONValue.string(text).jsonText }
}

/// Transport-level error codes; the raw values match IAPCore's `VerificationError.Code`.
public enum HTTPTransportErrorCode {
    public static let inputTooLarge = "INPUT_TOO_LARGE"
    public static let malformedRequest = "MALFORMED_REQUEST"
}

enum RequestID {
    static func accepting(_ candidate: String?) -> String {
        if let candidate, isSane(candidate) { return candidate }
        return generate()
    }

    static func isSane(_ id: String) -> Bool {
        let bytes = id.utf8
        guard (1...64).contains(bytes.count) else { return false }
        return bytes.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
                || b == 0x2D || b == 0x5F || b == 0x2E
        }
    }

    static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        let high = generator.next() as UInt64, low = generator.next() as UInt64
        return hex16(high) + hex16(low)
    }

    private static func hex16(_ value: UInt64) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: 16 - text.count) + text
    }
}

enum PercentDecoding {
    /// Nil on a `%` not followed by two hex digits or on bytes that are not UTF-8.
    static func decode(_ text: Substring, plusIsSpace: Bool) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "%"):
                guard let h = iterator.next().flatMap(hexValue), let l = iterator.next().flatMap(hexValue) else {
                    return nil
                }
                bytes.append(h << 4 | l)
            case UInt8(ascii: "+") where plusIsSpace: bytes.append(UInt8(ascii: " "))
            default: bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Query string to parameters. Nil when any name or value fails to decode.
    static func parseQuery(_ query: Substring) -> [String: String]? {
        var result: [String: String] = [:]
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decode(parts[0], plusIsSpace: true) else { return nil }
            let value = parts.count > 1 ? decode(parts[1], plusIsSpace: true) : ""
            guard let value else { return nil }
            if result[name] == nil { result[name] = value }
        }
        return result
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x41...0x46: return c - 0x41 + 10
        case 0x61...0x66: return c - 0x61 + 10
        default: return nil
        }
    }
}
