import Foundation

/// A deliberately dumb HTTP/1.1 client on POSIX sockets, so tests can send what a polite client
/// never would (huge headers, trickled bytes, lying lengths) and see exactly what comes back.
struct RawResponse {
    let status: Int
    let headers: [String: String]  // lower-cased names
    let body: [UInt8]
    var bodyText: String { String(decoding: body, as: UTF8.self) }
}

enum RawHTTPError: Error, Equatable { case connectFailed(Int32), closedBeforeResponse, malformed }

final class RawConnection {
    let fd: Int32

    /// Every read gives up after `readTimeoutSeconds`, so a broken server fails a test instead of hanging it.
    /// `sourceAddress` (another loopback address, such as 127.0.0.2) makes the connection come from a second client.
    init(port: Int, readTimeoutSeconds: Int = 5, sourceAddress: String? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var timeout = timeval(tv_sec: readTimeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if let sourceAddress {
            var source = sockaddr_in()
            source.sin_family = sa_family_t(AF_INET)
            source.sin_addr.s_addr = inet_addr(sourceAddress)
            let bound = withUnsafePointer(to: &source) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if bound != 0 {
                let code = errno
                close(fd)
                throw RawHTTPError.connectFailed(code)
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Foundation.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if result != 0 {
            let code = errno
            close(fd)
            throw RawHTTPError.connectFailed(code)
        }
    }

    deinit { close(fd) }

    /// False once the peer has closed (EPIPE / ECONNRESET); never raises SIGPIPE.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Foundation.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }

    @discardableResult
    func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Reads one response framed by Content-Length (or by the connection closing).
    func readResponse() throws -> RawResponse {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        func fill() -> Bool {
            let count = recv(fd, &chunk, chunk.count, 0)
            if count <= 0 { return false }
            buffer.append(contentsOf: chunk[0..<count])
            return true
        }
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        var headerEnd: Int?
        while headerEnd == nil {
            headerEnd = buffer.firstRange(of: separator)?.upperBound
            if headerEnd == nil && !fill() { throw RawHTTPError.closedBeforeResponse }
        }
        let head = String(decoding: buffer[..<headerEnd!], as: UTF8.self)
        let lines = head.components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw RawHTTPError.malformed }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        if let length = headers["content-length"].flatMap({ Int($0) }) {
            while buffer.count - headerEnd! < length {
                if !fill() { throw RawHTTPError.closedBeforeResponse }
            }
            return RawResponse(status: status, headers: headers, body: Array(buffer[headerEnd!..<(headerEnd! + length)]))
        }
        while fill() {}
        return RawResponse(status: status, headers: headers, body: Array(buffer[headerEnd!...]))
    }

    /// True when the server has closed its side: a read returns end-of-stream or a reset.
    func isClosedByPeer() -> Bool {
        var byte: UInt8 = 0
        let count = recv(fd, &byte, 1, 0)
        return count == 0 || (count < 0 && errno == ECONNRESET)
    }
}

extension RawConnection {
    static func request(port: Int, _ text: String) throws -> RawResponse {
        let connection = try RawConnection(port: port)
        connection.send(text)
        return try connection.readResponse()
    }
}
