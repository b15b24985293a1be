public struct HTTPServerConfiguration: Sendable {
    /// An IPv4 or IPv6 literal; the server binds to it alone (loopback unless told otherwise).
    public var host: String
    /// 0 asks the kernel for a free port; read the real one from `HTTPServer.port`.
    public var port: Int
    /// A larger `Content-Length` is answered 413 before the body is read; a chunked body that
    /// grows past it is cut off with 413.
    public var maxBodyBytes: Int
    /// Largest request head (request target and header fields); a larger one is answered 431.
    public var maxHeaderBytes: Int
    /// Largest request target (path and query); a longer one is answered 414.
    public var maxURIBytes: Int
    /// Idle connections are closed after this long, and a request must arrive completely
    /// (headers and body) within it, which is what stops a client trickling bytes (slowloris).
    public var connectionTimeoutSeconds: Int
    /// Connections open at once; past it new ones wait in the kernel's accept queue.
    public var maxConnections: Int
    /// Connections open at once from one client address; past it a new one is closed at once.
    /// 0 means no per-address limit (behind a proxy, where every client shares one address).
    public var perIPConnectionLimit: Int
    /// libmicrohttpd polling threads; each runs handlers up to their first suspension, the rest runs on Swift's pool.
    public var threads: Int
    /// HTTPS with this certificate and key; nil: plain HTTP.
    public var tls: HTTPServerTLS?

    public init(host: String = "127.0.0.1", port: Int, maxBodyBytes: Int = 256 * 1024,
                maxHeaderBytes: Int = 32 * 1024, maxURIBytes: Int = 8 * 1024, connectionTimeoutSeconds: Int = 30,
                maxConnections: Int = 1024, perIPConnectionLimit: Int = 0, threads: Int = 2,
                tls: HTTPServerTLS? = nil) {
        self.host = host
        self.port = port
        self.maxBodyBytes = maxBodyBytes
        self.maxHeaderBytes = maxHeaderBytes
        self.maxURIBytes = maxURIBytes
        self.connectionTimeoutSeconds = connectionTimeoutSeconds
        self.maxConnections = maxConnections
        self.perIPConnectionLimit = perIPConnectionLimit
        self.threads = threads
        self.tls = tls
    }

    /// libmicrohttpd's per-connection memory (read buffer, parsed headers, response buffer).
    /// It answers a head that does not fit by itself, in HTML, so it gets four times the head
    /// limit: a head up to about that size reaches the server's own JSON 431/414 refusals.
    var connectionMemoryBytes: Int { 4 * maxHeaderBytes }
}

public struct HTTPServerError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case invalidConfiguration
        case startFailed
        case alreadyStarted
    }

    public let kind: Kind
    public let message: String

    public var description: String { "\(kind): \(message)" }
}
