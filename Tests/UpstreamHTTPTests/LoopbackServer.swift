import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A tiny HTTP/1.1 server on 127.0.0.1 for tests: one thread accepts, one thread per connection,
/// keep-alive by default, scripted answers, and a count of accepted connections.
final class LoopbackServer: @unchecked Sendable {
    struct Request: Sendable {
        let method: String
        let target: String
        let headers: [String: String]
        let body: [UInt8]
    }

    enum Action: Sendable {
        case respond(status: Int, headers: [(String, String)] = [], body: [UInt8] = [])
        /// Bytes written as they are, then the connection is closed (for bodies without Content-Length).
        case raw([UInt8])
        /// Never answer; hold the connection until the client gives up.
        case hang
    }

    private struct State {
        var acceptedConnections = 0
        var requests: [Request] = []
        var openSockets: Set<Int32> = []
        var stopped = false
    }

    let port: UInt16
    private let listener: Int32
    private let state = Mutex(State())
    private let handler: @Sendable (Request) -> Action

    init(handler: @escaping @Sendable (Request) -> Action) throws {
        self.handler = handler
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else { close(fd); throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = UInt16(bigEndian: address.sin_port)
        Thread { [self] in acceptLoop() }.start()
    }

    var baseURL: String { "http://127.0.0.1:\(port)" }
    var acceptedConnections: Int { state.withLock { $0.acceptedConnections } }
    var requests: [Request] { state.withLock { $0.requests } }

    func stop() {
        let sockets = state.withLock { state -> Set<Int32> in
            state.stopped = true
            return state.openSockets
        }
        // shutdown() wakes threads blocked in accept()/recv(); each thread closes its own descriptor.
        shutdown(listener, Int32(SHUT_RDWR))
        for fd in sockets { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    /// A port on loopback with nothing listening: bound, then closed again.
    static func unusedPort() throws -> UInt16 {
        let server = try LoopbackServer { _ in .hang }
        let port = server.port
        server.stop()
        return port
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if state.withLock({ $0.stopped }) { break }
                continue
            }
            let keep = state.withLock { state -> Bool in
                guard !state.stopped else { return false }
                state.acceptedConnections += 1
                state.openSockets.insert(client)
                return true
            }
            guard keep else { close(client); break }
            Thread { [self] in serve(client) }.start()
        }
        close(listener)
    }

    private func serve(_ fd: Int32) {
        defer {
            state.withLock { _ = $0.openSockets.remove(fd) }
            close(fd)
        }
        var buffer: [UInt8] = []
        while let request = readRequest(fd, &buffer) {
            state.withLock { $0.requests.append(request) }
            switch handler(request) {
            case .respond(let status, let headers, let body):
                var head = "HTTP/1.1 \(status) Scripted\r\nContent-Length: \(body.count)\r\n"
                for (name, value) in headers { head += "\(name): \(value)\r\n" }
                head += "\r\n"
                guard write(fd, Array(head.utf8) + body) else { return }
            case .raw(let bytes):
                _ = write(fd, bytes)
                return
            case .hang:
                var sink = [UInt8](repeating: 0, count: 1024)
                while recv(fd, &sink, sink.count, 0) > 0 {}
                return
            }
            if request.headers["connection"]?.lowercased() == "close" { return }
        }
    }

    private func readRequest(_ fd: Int32, _ buffer: inout [UInt8]) -> Request? {
        let terminator: [UInt8] = [13, 10, 13, 10]
        var headerEnd: Int?
        while true {
            if let end = find(terminator, in: buffer) { headerEnd = end; break }
            guard fill(fd, &buffer) else { return nil }
        }
        guard let headerEnd else { return nil }
        let lines = String(decoding: buffer[..<headerEnd], as: UTF8.self).components(separatedBy: "\r\n")
        let requestLine = lines[0].split(separator: " ")
        guard requestLine.count == 3 else { return nil }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = Int(headers["content-length"] ?? "0") ?? 0
        let bodyStart = headerEnd + 4
        while buffer.count < bodyStart + length {
            guard fill(fd, &buffer) else { return nil }
        }
        let body = Array(buffer[bodyStart..<(bodyStart + length)])
        buffer.removeFirst(bodyStart + length)
        return Request(method: String(requestLine[0]), target: String(requestLine[1]), headers: headers, body: body)
    }

    private func fill(_ fd: Int32, _ buffer: inout [UInt8]) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        let count = recv(fd, &chunk, chunk.count, 0)
        guard count > 0 else { return false }
        buffer.append(contentsOf: chunk[..<count])
        return true
    }

    private func write(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    private func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start..<(start + needle.count)].elementsEqual(needle) {
            return start
        }
        return nil
    }
}
