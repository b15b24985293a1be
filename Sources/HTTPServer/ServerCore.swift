import CMicroHTTPD
import Dispatch
import Foundation
import Synchronization

/// A connection pointer handed to the handler's task; used only by whoever takes it out of
/// `Lifecycle.suspended` (the handler's `finish` or `stopDaemon`), so it is resumed exactly once,
/// while suspended (so MHD keeps it) and before the daemon is stopped.
struct SuspendedConnection: @unchecked Sendable, Hashable {
    let pointer: OpaquePointer
}

/// `ServerCore.idle(within:)`'s one waiter, and whether its wait has ended.
struct IdleWait {
    var continuation: CheckedContinuation<Void, Never>?
    var ended = false
}

struct Lifecycle {
    var daemon: OpaquePointer?
    var draining = false
    var boundPort = 0
    /// Connections parked while their handler runs. libmicrohttpd 0.9.75 aborts the process if
    /// it is stopped with any still suspended, so stopping resumes every one of them first.
    var suspended: Set<SuspendedConnection> = []
}

/// Everything the C callbacks reach through their `cls` pointer.
final class ServerCore: @unchecked Sendable {
    let configuration: HTTPServerConfiguration
    let handler: HTTPHandler
    let watchdog: ConnectionWatchdog
    let inFlightCount = Atomic<Int>(0)
    /// How many upload callbacks delivered body bytes; lets tests prove bodies arrive in pieces.
    let bodyChunksReceived = Atomic<Int>(0)
    /// Serialises taking a parked connection back against stopping the daemon: after `daemon` is
    /// cleared no task takes one again.
    let lifecycle = Mutex(Lifecycle())
    /// Handlers queueing their response and resuming their connection now, outside `lifecycle`
    /// (those libmicrohttpd calls take its own lock and write its wake-up eventfd: holding ours
    /// through them made the next request's dispatch wait, a futex sleep and switch per request).
    /// Counted under `lifecycle`; stopping waits for it to reach 0 before it stops the daemon.
    let resuming = Atomic<Int>(0)
    /// Set once stopping took the daemon: from then on the finish leaving libmicrohttpd last wakes it.
    private let stopping = Atomic<Bool>(false)
    private let finishesLeft = NSCondition()
    /// Set before `idle(within:)` waits: from then on the request completing last ends its wait.
    private let awaitingIdle = Atomic<Bool>(false)
    private let idleWait = Mutex(IdleWait())
    /// The largest POST body whose handler starts on libmicrohttpd's thread (a signed transaction
    /// is ~5 KB, a notification ~17 KB; a receipt of many MB is parsed on the pool instead).
    static let maxBodyStartedInline = 64 * 1024

    init(configuration: HTTPServerConfiguration, handler: @escaping HTTPHandler) {
        self.configuration = configuration
        self.handler = handler
        self.watchdog = ConnectionWatchdog(timeoutSeconds: configuration.connectionTimeoutSeconds)
    }

    /// First call for a request: headers are complete, no body read yet. Refusals here are sent
    /// without reading the body.
    func beginRequest(_ state: RequestState, connection: OpaquePointer, version: String) -> MHD_Result {
        let uri = state.rawURI
        // libmicrohttpd is given room for heads larger than these limits (see connectionMemoryBytes)
        // so that they are refused here, in JSON, rather than by it in HTML.
        if uri.utf8.count > configuration.maxURIBytes {
            return refuse(state, connection: connection, status: 414, code: HTTPTransportErrorCode.inputTooLarge,
                          message: "The request target exceeds \(configuration.maxURIBytes) bytes.")
        }
        _ = withUnsafeMutablePointer(to: &state.headers) {
            MHD_get_connection_values(connection, MHD_ValueKind.HEADER_KIND, headerCollector, UnsafeMutableRawPointer($0))
        }
        let headBytes = state.headers.reduce(uri.utf8.count) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
        if headBytes > configuration.maxHeaderBytes {
            return refuse(state, connection: connection, status: 431, code: HTTPTransportErrorCode.inputTooLarge,
                          message: "The request target and header fields exceed \(configuration.maxHeaderBytes) bytes.")
        }
        let pathEnd = uri.firstIndex(of: "?") ?? uri.endIndex
        state.path = String(uri[..<pathEnd])
        if pathEnd < uri.endIndex {
            guard let query = PercentDecoding.parseQuery(uri[uri.index(after: pathEnd)...]) else {
                return refuse(state, connection: connection, status: 400, code: HTTPTransportErrorCode.malformedRequest,
                              message: "The query string is not valid percent-encoded UTF-8.")
            }
            state.query = query
        }
        // Two framings (repeated Content-Length, or one beside Transfer-Encoding) are how requests are
        // smuggled past a proxy that reads the other one; libmicrohttpd picks one silently, so refuse (RFC 9112 §6.3).
        let lengths = state.headers.values(for: "Content-Length")
        let codings = state.headers.values(for: "Transfer-Encoding")
        if lengths.count > 1 || (!lengths.isEmpty && !codings.isEmpty) {
            return refuse(state, connection: connection, status: 400, code: HTTPTransportErrorCode.malformedRequest,
                          message: "The request has more than one body length (Content-Length, Transfer-Encoding).")
        }
        // chunked is the only coding read; with any other the body's end cannot be found, so RFC 9112 §6.3
        // requires 400 and closing (libmicrohttpd would wait for a body it cannot delimit until the timeout).
        if !codings.isEmpty && (codings.count > 1 || codings[0].trimmingCharacters(in: .whitespaces).lowercased() != "chunked") {
            return refuse(state, connection: connection, status: 400, code: HTTPTransportErrorCode.malformedRequest,
                          message: "Transfer-Encoding other than chunked is not supported.", closeConnection: true)
        }
        // HTTP/1.0 has no Transfer-Encoding: RFC 9112 §6.1 says to treat such framing as faulty.
        if !codings.isEmpty && version == "HTTP/1.0" {
            return refuse(state, connection: connection, status: 400, code: HTTPTransportErrorCode.malformedRequest,
                          message: "Transfer-Encoding is not part of HTTP/1.0.", closeConnection: true)
        }
        if let text = lengths.first {
            guard let length = Int(text), length >= 0 else {
                // Too many digits for an Int is still "too large", not malformed.
                if !text.isEmpty && text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
                    return refuseTooLarge(state, connection: connection)
                }
                return refuse(state, connection: connection, status: 400, code: HTTPTransportErrorCode.malformedRequest,
                              message: "Content-Length is not a number.")
            }
            if length > configuration.maxBodyBytes { return refuseTooLarge(state, connection: connection) }
            state.body.reserveCapacity(length)
        }
        return MHD_Result.YES
    }

    private func refuseTooLarge(_ state: RequestState, connection: OpaquePointer) -> MHD_Result {
        refuse(state, connection: connection, status: 413, code: HTTPTransportErrorCode.inputTooLarge,
               message: "The request body exceeds \(configuration.maxBodyBytes) bytes.")
    }

    private func refuse(_ state: RequestState, connection: OpaquePointer, status: Int, code: String,
                        message: String, closeConnection: Bool = false) -> MHD_Result {
        state.phase = .answered
        // The body names the request id too: the envelope is the same whoever refuses.
        let requestId = requestId(on: connection)
        let response = makeResponse(.error(status, code: code, message: message, requestId: requestId), requestId: requestId,
                                    closeConnection: closeConnection)
        defer { MHD_destroy_response(response) }
        return MHD_queue_response(connection, UInt32(status), response)
    }

    /// A chunked body grew past the limit. libmicrohttpd 0.9.75 refuses to queue a response while
    /// body data is still arriving (even for a suspended connection), and draining an unbounded
    /// body to answer at its end is what the limit exists to prevent. So the 413 is written to the
    /// plain-TCP socket directly, the write side is shut, and MHD is told to close the connection
    /// (over TLS the connection is closed without the 413).
    func rejectMidBody(_ state: RequestState, connection: OpaquePointer) -> MHD_Result {
        state.phase = .answered
        state.body = []
        // Over TLS the socket carries records only GnuTLS may write: the connection is just closed.
        guard configuration.tls == nil,
              let info = iapgw_mhd_connection_info(connection, MHD_ConnectionInfoType.CONNECTION_INFO_CONNECTION_FD)
        else { return MHD_Result.NO }
        let fd = info.pointee.connect_fd
        let requestId = requestId(on: connection)
        let error = HTTPResponse.error(413, code: HTTPTransportErrorCode.inputTooLarge,
                                       message: "The request body exceeds \(configuration.maxBodyBytes) bytes.", requestId: requestId)
        let head = "HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n"
            + "Content-Length: \(error.body.count)\r\nX-Request-Id: \(requestId)\r\n"
            + "Connection: close\r\n\r\n"
        let bytes = Array(head.utf8) + error.body
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        _ = Foundation.shutdown(fd, Int32(SHUT_WR))
        return MHD_Result.NO
    }

    /// The whole request has arrived: hand it to the handler without holding an MHD thread.
    func dispatch(_ state: RequestState, connection: OpaquePointer, method: String) -> MHD_Result {
        state.watch?.readDeadline.store(0, ordering: .relaxed)
        let request = HTTPRequest(method: method, path: state.path, query: state.query, headers: state.headers,
                                  body: state.body, remoteAddress: remoteAddress(of: connection))
        state.body = []
        let suspended = SuspendedConnection(pointer: connection)
        let parked = lifecycle.withLock { life -> Bool in
            guard life.daemon != nil else { return false }
            life.suspended.insert(suspended)
            MHD_suspend_connection(suspended.pointer)
            return true
        }
        // Not parked: the daemon is being stopped and this connection is about to be closed.
        guard parked else { return MHD_Result.NO }
        let handler = self.handler
        let run: @Sendable () async -> Void = {
            let response = await handler(request)
            self.finish(state, connection: suspended, requestId: request.requestId, response: response)
        }
        // A small POST (a verify, a notification) starts on this thread (libmicrohttpd's) and runs
        // here until its first suspension (its JWS verification, up to the ledger call), which saves
        // waking a pool thread per request. So no handler may block before its first `await` (that
        // would stall every connection of this thread; online checks await their OCSP answers).
        // Anything else (a large receipt body, the GET reports, which may even carry on here when
        // their first storage answer comes before they suspend) starts on the pool as before. One
        // that never suspends finishes here, inside the access callback: `finish` queues its
        // response and resumes the connection just parked, which libmicrohttpd completes on its
        // next turn (or, if queueing fails, through `.dispatched`).
        if method == "POST" && request.body.count <= Self.maxBodyStartedInline {
            Task.immediate(operation: run)
        } else {
            Task(operation: run)
        }
        return MHD_Result.YES
    }

    /// Returns once no request is in flight, or once `limit` has passed, holding no thread while
    /// it waits: the request completing last (`requestCompleted`) or a timer ends the wait.
    func idle(within limit: Duration) async {
        awaitingIdle.store(true, ordering: .sequentiallyConsistent)
        let timer = Task {
            try? await Task.sleep(for: limit)
            self.endIdleWait()
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = idleWait.withLock { wait -> Bool in
                guard !wait.ended, inFlightCount.load(ordering: .sequentiallyConsistent) > 0 else { return true }
                wait.continuation = continuation
                return false
            }
            if now { continuation.resume() }
        }
        timer.cancel()
    }

    /// libmicrohttpd is done with a request (its completion callback).
    func requestCompleted() {
        let left = inFlightCount.subtract(1, ordering: .sequentiallyConsistent).newValue
        if left == 0, awaitingIdle.load(ordering: .sequentiallyConsistent) { endIdleWait() }
    }

    private func endIdleWait() {
        let waiting = idleWait.withLock { wait -> CheckedContinuation<Void, Never>? in
            wait.ended = true
            defer { wait.continuation = nil }
            return wait.continuation
        }
        waiting?.resume()
    }

    /// `stopDaemon` on a thread of its own: it waits for libmicrohttpd's threads to end.
    func stop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                self.stopDaemon()
                continuation.resume()
            }
            thread.name = "HTTPServer.stop"
            thread.start()
        }
    }

    /// Resumes every parked connection without a response (their handlers' late answers are
    /// dropped), then stops the daemon, which closes them. Blocks until libmicrohttpd's threads
    /// end: async callers use `stop()`.
    func stopDaemon() {
        let daemon = lifecycle.withLock { life -> OpaquePointer? in
            defer { life.daemon = nil }
            for connection in life.suspended { MHD_resume_connection(connection.pointer) }
            life.suspended.removeAll()
            stopping.store(true, ordering: .sequentiallyConsistent)
            return life.daemon
        }
        // Finishes that took their connection before `daemon` was cleared: their two libmicrohttpd calls
        // (never blocked for long) must end before the daemon and its connections are freed.
        finishesLeft.lock()
        while resuming.load(ordering: .sequentiallyConsistent) > 0 { finishesLeft.wait() }
        finishesLeft.unlock()
        if let daemon { MHD_stop_daemon(daemon) }
        watchdog.stop()
    }

    /// A finish is out of libmicrohttpd; the last one while stopping wakes `stopDaemon`.
    private func leftLibmicrohttpd() {
        let left = resuming.subtract(1, ordering: .sequentiallyConsistent).newValue
        guard left == 0, stopping.load(ordering: .sequentiallyConsistent) else { return }
        finishesLeft.lock()
        finishesLeft.broadcast()
        finishesLeft.unlock()
    }

    func finish(_ state: RequestState, connection: SuspendedConnection, requestId: String,
                        response: HTTPResponse) {
        let mhdResponse = makeResponse(response, requestId: requestId)
        let status = UInt32(clamping: response.status)
        // One short critical section: the connection is taken back (unless stopping resumed it first);
        // the answer is whether the server is draining (then the connection closes after it).
        let draining = lifecycle.withLock { life -> Bool? in
            guard life.daemon != nil, life.suspended.remove(connection) != nil else { return nil }
            resuming.add(1, ordering: .relaxed)
            return life.draining
        }
        guard let draining else {
            MHD_destroy_response(mhdResponse)
            return
        }
        defer { leftLibmicrohttpd() }
        if draining { _ = MHD_add_response_header(mhdResponse, "Connection", "close") }
        if MHD_queue_response(connection.pointer, status, mhdResponse) == MHD_Result.YES {
            MHD_destroy_response(mhdResponse)
        } else {
            state.pendingResponse.withLock { $0 = PendingResponse(response: mhdResponse, status: status) }
        }
        MHD_resume_connection(connection.pointer)
    }

    private func requestId(on connection: OpaquePointer) -> String {
        RequestID.accepting(MHD_lookup_connection_value(connection, MHD_ValueKind.HEADER_KIND, "X-Request-Id")
            .map { String(cString: $0) })
    }

    private func makeResponse(_ response: HTTPResponse, requestId: String, closeConnection: Bool = false)
        -> OpaquePointer {
        let mhdResponse = response.body.withUnsafeBytes { bytes in
            MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress),
                                            MHD_ResponseMemoryMode.RESPMEM_MUST_COPY)
        }!
        for (name, value) in response.headers where !HTTPHeaders.sameName(name, "X-Request-Id") {
            _ = MHD_add_response_header(mhdResponse, name, value)
        }
        _ = MHD_add_response_header(mhdResponse, "X-Request-Id", requestId)
        if closeConnection { _ = MHD_add_response_header(mhdResponse, "Connection", "close") }
        return mhdResponse
    }
}
