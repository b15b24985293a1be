import CMicroHTTPD
import Foundation
import Synchronization

public typealias HTTPHandler = @Sendable (HTTPRequest) async -> HTTPResponse

/// HTTP/1.1 on libmicrohttpd. Its threads parse and write; each complete request's connection is
/// suspended while the async handler runs, then resumed with the response. The handler starts on
/// libmicrohttpd's thread and continues on Swift's pool after its first suspension, so it must
/// not block before its first `await`.
public final class HTTPServer: Sendable {
    public let configuration: HTTPServerConfiguration
    let core: ServerCore
    private let address: BindAddress

    public init(configuration: HTTPServerConfiguration, handler: @escaping HTTPHandler) throws {
        let c = configuration
        guard (0...65535).contains(c.port) else { throw Self.invalid("port \(c.port) is out of range") }
        guard c.maxBodyBytes >= 0, c.maxHeaderBytes >= 1024, (256...c.maxHeaderBytes).contains(c.maxURIBytes),
              c.connectionTimeoutSeconds >= 1, c.maxConnections >= 1, c.perIPConnectionLimit >= 0,
              (1...256).contains(c.threads)
        else {
            throw Self.invalid("limits must be positive (maxHeaderBytes at least 1024, maxURIBytes 256...maxHeaderBytes,"
                + " threads 1...256)")
        }
        guard let address = BindAddress(host: c.host, port: UInt16(c.port)) else {
            throw Self.invalid("host must be an IPv4 or IPv6 literal, got \(c.host)")
        }
        self.configuration = configuration
        self.address = address
        self.core = ServerCore(configuration: configuration, handler: handler)
    }

    /// A server dropped without `shutdown` is stopped here, on the releasing thread.
    deinit { core.stopDaemon() }

    /// The port actually bound (the kernel's choice when configured with 0); 0 before `start()`.
    public var port: Int { core.lifecycle.withLock { $0.boundPort } }

    /// Requests whose request line has arrived and whose response has not completed.
    public var inFlight: Int { core.inFlightCount.load(ordering: .relaxed) }

    var bodyChunksReceived: Int { core.bodyChunksReceived.load(ordering: .relaxed) }

    public func start() throws {
        try core.lifecycle.withLock { life in
            guard life.daemon == nil, !life.draining else {
                throw HTTPServerError(kind: .alreadyStarted, message: "the server was already started")
            }
            let daemon = try startDaemon()
            life.daemon = daemon
            life.boundPort = Int(iapgw_mhd_daemon_info(daemon, MHD_DaemonInfoType.DAEMON_INFO_BIND_PORT)?.pointee.port ?? 0)
        }
    }

    /// Stops accepting at once (the listening socket is closed, so new connections are refused),
    /// lets requests in flight finish for up to `gracePeriod`, then closes everything. No thread of
    /// the cooperative pool waits meanwhile: the last request to complete ends the grace period
    /// early, and the daemon is stopped on a thread of its own (that joins libmicrohttpd's).
    public func shutdown(gracePeriod: Duration) async {
        let daemon = core.lifecycle.withLock { life -> OpaquePointer? in
            guard !life.draining else { return nil }
            life.draining = true
            return life.daemon
        }
        guard let daemon else { return }
        let listenSocket = MHD_quiesce_daemon(daemon)
        if listenSocket >= 0 { close(listenSocket) }
        await core.idle(within: gracePeriod)
        await core.stop()
    }

    private func startDaemon() throws -> OpaquePointer {
        let c = configuration
        // poll(), not epoll: libmicrohttpd 0.9.75's MHD_quiesce_daemon removes the listening socket
        // from each worker's epoll set from the caller's thread, racing the workers, and aborts the
        // process when that fails ("Failed to remove listen FD from epoll set", seen in tests).
        // With poll() the workers are told through their inter-thread channel instead.
        var flags = MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_POLL.rawValue | MHD_USE_ITC.rawValue
            | MHD_ALLOW_SUSPEND_RESUME.rawValue
        if address.isIPv6 { flags |= MHD_USE_IPv6.rawValue }
        if c.tls != nil { flags |= MHD_USE_TLS.rawValue }
        let cls = Unmanaged.passUnretained(core).toOpaque()
        let daemon: OpaquePointer? = address.withSockaddr { sockaddrPointer in
            var options: [CVarArg] = [
                MHD_OPTION.SOCK_ADDR.rawValue, OpaquePointer(sockaddrPointer),
                MHD_OPTION.URI_LOG_CALLBACK.rawValue, unsafeBitCast(uriLogCallback, to: OpaquePointer.self), OpaquePointer(cls),
                MHD_OPTION.NOTIFY_COMPLETED.rawValue, unsafeBitCast(requestCompletedCallback, to: OpaquePointer.self), OpaquePointer(cls),
                MHD_OPTION.NOTIFY_CONNECTION.rawValue, unsafeBitCast(connectionNotifyCallback, to: OpaquePointer.self), OpaquePointer(cls),
                MHD_OPTION.CONNECTION_MEMORY_LIMIT.rawValue, c.connectionMemoryBytes,
                MHD_OPTION.CONNECTION_TIMEOUT.rawValue, UInt32(c.connectionTimeoutSeconds),
                MHD_OPTION.CONNECTION_LIMIT.rawValue, UInt32(c.maxConnections),
                MHD_OPTION.PER_IP_CONNECTION_LIMIT.rawValue, UInt32(c.perIPConnectionLimit),
            ]
            if c.threads > 1 { options += [MHD_OPTION.THREAD_POOL_SIZE.rawValue, UInt32(c.threads)] }
            if let tls = c.tls { options += tls.daemonOptions() }
            options.append(MHD_OPTION.END.rawValue)
            return withVaList(options) { arguments in
                MHD_start_daemon_va(flags, UInt16(c.port), nil, nil, accessHandlerCallback, cls, arguments)
            }
        }
        guard let daemon else {
            throw HTTPServerError(kind: .startFailed, message: "could not listen on \(c.host):\(c.port)")
        }
        return daemon
    }

    private static func invalid(_ message: String) -> HTTPServerError {
        HTTPServerError(kind: .invalidConfiguration, message: message)
    }
}

/// The configured host as a socket address; only literals, so binding never depends on DNS.
struct BindAddress: Sendable {
    private let v4: sockaddr_in?
    private let v6: sockaddr_in6?
    var isIPv6: Bool { v6 != nil }

    init?(host: String, port: UInt16) {
        var sin = sockaddr_in()
        var sin6 = sockaddr_in6()
        if inet_pton(AF_INET, host, &sin.sin_addr) == 1 {
            (sin.sin_family, sin.sin_port) = (sa_family_t(AF_INET), port.bigEndian)
            (v4, v6) = (sin, nil)
        } else if inet_pton(AF_INET6, host, &sin6.sin6_addr) == 1 {
            (sin6.sin6_family, sin6.sin6_port) = (sa_family_t(AF_INET6), port.bigEndian)
            (v4, v6) = (nil, sin6)
        } else {
            return nil
        }
    }

    func withSockaddr<T>(_ body: (UnsafeMutableRawPointer) -> T) -> T {
        if var sin = v4 { return withUnsafeMutablePointer(to: &sin) { body(UnsafeMutableRawPointer($0)) } }
        var sin6 = v6!
        return withUnsafeMutablePointer(to: &sin6) { body(UnsafeMutableRawPointer($0)) }
    }
}
