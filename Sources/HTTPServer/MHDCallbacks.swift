import CMicroHTTPD
import Foundation
import Synchronization

/// State of one request, created when its request line arrives and released when
/// libmicrohttpd reports it completed. The MHD thread owns it until dispatch; after that only
/// the handler's task touches `pendingResponse`, under the lock.
final class RequestState: @unchecked Sendable {
    enum Phase { case headers, body, dispatched, answered }

    let rawURI: String
    let watch: ConnectionWatch?
    var phase = Phase.headers
    var body: [UInt8] = []
    var path = ""
    var query: [String: String] = [:]
    /// Read once, when the headers are complete (first call), for the checks there and the handler.
    var headers = HTTPHeaders()
    /// A response (and its status) the handler produced but that could not be queued while suspended.
    let pendingResponse = Mutex<PendingResponse?>(nil)

    init(rawURI: String, watch: ConnectionWatch?) {
        self.rawURI = rawURI
        self.watch = watch
    }
}

struct PendingResponse: @unchecked Sendable {
    let response: OpaquePointer
    let status: UInt32
}

private func core(_ cls: UnsafeMutableRawPointer?) -> ServerCore {
    Unmanaged<ServerCore>.fromOpaque(cls!).takeUnretainedValue()
}

/// Runs once per request, before headers are parsed; its result becomes the request's context.
/// It sees the URI before libmicrohttpd decodes it, which is how the raw path is kept.
let uriLogCallback: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?)
    -> UnsafeMutableRawPointer? = { cls, uri, connection in
    let server = core(cls)
    var watch: ConnectionWatch?
    if let connection, let info = iapgw_mhd_connection_info(connection, MHD_ConnectionInfoType.CONNECTION_INFO_SOCKET_CONTEXT),
       let context = info.pointee.socket_context {
        watch = Unmanaged<ConnectionWatch>.fromOpaque(context).takeUnretainedValue()
    }
    let state = RequestState(rawURI: uri.map { String(cString: $0) } ?? "", watch: watch)
    server.inFlightCount.add(1, ordering: .relaxed)
    return Unmanaged.passRetained(state).toOpaque()
}

let requestCompletedCallback: MHD_RequestCompletedCallback = { cls, _, context, _ in
    guard let context, let raw = context.pointee else { return }
    context.pointee = nil
    let state = Unmanaged<RequestState>.fromOpaque(raw).takeRetainedValue()
    let server = core(cls)
    state.watch?.readDeadline.store(server.watchdog.nextDeadline(), ordering: .relaxed)
    if let orphan = state.pendingResponse.withLock({ p -> PendingResponse? in defer { p = nil }; return p }) {
        MHD_destroy_response(orphan.response)
    }
    server.requestCompleted()
}

let connectionNotifyCallback: MHD_NotifyConnectionCallback = { cls, connection, socketContext, code in
    guard let socketContext else { return }
    let server = core(cls)
    switch code {
    case .CONNECTION_NOTIFY_STARTED:
        guard let connection, let info = iapgw_mhd_connection_info(connection, MHD_ConnectionInfoType.CONNECTION_INFO_CONNECTION_FD)
        else { return }
        let watch = ConnectionWatch(fd: info.pointee.connect_fd, deadline: server.watchdog.nextDeadline())
        server.watchdog.opened(watch)
        socketContext.pointee = Unmanaged.passRetained(watch).toOpaque()
    case .CONNECTION_NOTIFY_CLOSED:
        guard let raw = socketContext.pointee else { return }
        socketContext.pointee = nil
        let watch = Unmanaged<ConnectionWatch>.fromOpaque(raw).takeRetainedValue()
        server.watchdog.closed(watch)
    default:
        break
    }
}

let accessHandlerCallback: MHD_AccessHandlerCallback = { cls, connection, _, method, version, uploadData, uploadSize, context in
    guard let connection, let uploadSize, let context, let raw = context.pointee else { return MHD_Result.NO }
    let server = core(cls)
    let state = Unmanaged<RequestState>.fromOpaque(raw).takeUnretainedValue()
    switch state.phase {
    case .headers:
        state.phase = .body
        return server.beginRequest(state, connection: connection, version: version.map { String(cString: $0) } ?? "")
    case .body:
        let size = uploadSize.pointee
        if size > 0, let uploadData {
            server.bodyChunksReceived.add(1, ordering: .relaxed)
            if state.body.count + size > server.configuration.maxBodyBytes {
                uploadSize.pointee = 0
                return server.rejectMidBody(state, connection: connection)
            }
            uploadSize.pointee = 0
            uploadData.withMemoryRebound(to: UInt8.self, capacity: size) {
                state.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: size))
            }
            return MHD_Result.YES
        }
        state.phase = .dispatched
        return server.dispatch(state, connection: connection, method: method.map { String(cString: $0) } ?? "")
    case .dispatched:
        // Resumed without a queued response (queueing while suspended failed): queue it here.
        uploadSize.pointee = 0
        guard let pending = state.pendingResponse.withLock({ p -> PendingResponse? in defer { p = nil }; return p })
        else { return MHD_Result.NO }
        state.phase = .answered
        let result = MHD_queue_response(connection, pending.status, pending.response)
        MHD_destroy_response(pending.response)
        return result
    case .answered:
        uploadSize.pointee = 0
        return MHD_Result.YES
    }
}

let headerCollector: MHD_KeyValueIterator = { cls, _, key, value in
    guard let cls, let key else { return MHD_Result.YES }
    let headers = cls.assumingMemoryBound(to: HTTPHeaders.self)
    headers.pointee.add(name: String(cString: key), value: value.map { String(cString: $0) } ?? "")
    return MHD_Result.YES
}

func remoteAddress(of connection: OpaquePointer) -> String {
    guard let info = iapgw_mhd_connection_info(connection, MHD_ConnectionInfoType.CONNECTION_INFO_CLIENT_ADDRESS),
          let address = info.pointee.client_addr else { return "" }
    var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    switch Int32(address.pointee.sa_family) {
    case AF_INET:
        address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
            var addr = sin.pointee.sin_addr
            _ = inet_ntop(AF_INET, &addr, &text, socklen_t(text.count))
        }
    case AF_INET6:
        address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
            var addr = sin6.pointee.sin6_addr
            _ = inet_ntop(AF_INET6, &addr, &text, socklen_t(text.count))
        }
    default:
        return ""
    }
    let length = text.firstIndex(of: 0) ?? text.count
    return String(decoding: text[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
