/// Reads HTTP/1.1 responses off a keep-alive connection as bytes arrive, in any split, without
/// keeping their bodies: a load generator needs each response's status and where it ends, nothing
/// else. Bounded: a header section over `maxHeaderBytes` or a declared body over `maxBodyBytes` is
/// an error (a misbehaving server must not make the generator buffer without end), and so is any
/// response whose end it cannot know on a kept-alive connection (no Content-Length, chunked).
public struct HTTPResponseReader {
    public struct Response: Equatable, Sendable {
        public let status: Int
        /// The server said `Connection: close`: this connection carries nothing more.
        public let closesConnection: Bool
    }

    public enum ReadError: Error, Equatable, CustomStringConvertible {
        case headerTooLarge(limit: Int)
        case bodyTooLarge(declared: Int, limit: Int)
        case malformed(String)
        case unsupported(String)

        public var description: String {
            switch self {
            case .headerTooLarge(let limit): "response header section over \(limit) bytes"
            case .bodyTooLarge(let declared, let limit): "response body of \(declared) bytes over the limit of \(limit)"
            case .malformed(let what): "malformed response: \(what)"
            case .unsupported(let what): "unsupported response: \(what)"
            }
        }
    }

    public let maxHeaderBytes: Int
    public let maxBodyBytes: Int
    private var header: [UInt8] = []
    /// Body bytes still to skip for the response parsed last (nil: reading a header section).
    private var bodyLeft: Int?
    private var parsed: Response?

    public init(maxHeaderBytes: Int = 16 * 1024, maxBodyBytes: Int = 1 << 20) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBodyBytes = maxBodyBytes
    }

    /// True between responses (nothing of a next one read yet).
    public var isIdle: Bool { bodyLeft == nil && header.isEmpty }

    /// Feeds `bytes`; returns every response they complete, in order. After an error the
    /// connection's byte stream cannot be trusted: close it (the reader is then unusable).
    public mutating func consume(_ bytes: UnsafeRawBufferPointer) throws(ReadError) -> [Response] {
        var done: [Response] = []
        var i = 0
        while i < bytes.count {
            if let left = bodyLeft {
                let take = min(left, bytes.count - i)
                i += take
                bodyLeft = left - take
            } else {
                let byte = bytes[i]
                i += 1
                header.append(byte)
                if header.count > maxHeaderBytes { throw .headerTooLarge(limit: maxHeaderBytes) }
                if byte == 0x0A, header.count >= 4, header[header.count - 2] == 0x0D, header[header.count - 3] == 0x0A,
                    header[header.count - 4] == 0x0D
                {
                    let (response, length) = try Self.parseHeader(header, maxBodyBytes: maxBodyBytes)
                    header.removeAll(keepingCapacity: true)
                    parsed = response
                    bodyLeft = length
                }
            }
            if bodyLeft == 0, let response = parsed {
                done.append(response)
                bodyLeft = nil
                parsed = nil
            }
        }
        return done
    }

    /// The status line and the headers that delimit the body (CRLF CRLF included in `bytes`).
    static func parseHeader(_ bytes: [UInt8], maxBodyBytes: Int) throws(ReadError) -> (Response, Int) {
        let text = String(decoding: bytes.dropLast(4), as: UTF8.self)
        let lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        let statusLine = lines[0].split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard statusLine.count >= 2, statusLine[0] == "HTTP/1.1" || statusLine[0] == "HTTP/1.0",
            statusLine[1].count == 3, let status = Int(statusLine[1]), (200...599).contains(status)
        else { throw .malformed("status line") }
        var length: Int?
        var closes = statusLine[0] == "HTTP/1.0"
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { throw .malformed("header line") }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingSpaces()
            switch name {
            case "content-length":
                guard !value.isEmpty, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), value.count <= 18,
                    let n = Int(value)
                else { throw .malformed("Content-Length") }
                guard length == nil || length == n else { throw .malformed("conflicting Content-Length") }
                guard n <= maxBodyBytes else { throw .bodyTooLarge(declared: n, limit: maxBodyBytes) }
                length = n
            case "transfer-encoding":
                throw .unsupported("Transfer-Encoding \(value)")
            case "connection":
                let tokens = value.lowercased().split(separator: ",").map { $0.trimmingSpaces() }
                if tokens.contains("close") { closes = true }
                if tokens.contains("keep-alive") && statusLine[0] == "HTTP/1.0" { closes = false }
            default:
                break
            }
        }
        if status == 204 || status == 304 { return (Response(status: status, closesConnection: closes), 0) }
        guard let length else { throw .unsupported("no Content-Length (a kept-alive response must say where it ends)") }
        return (Response(status: status, closesConnection: closes), length)
    }
}

extension Substring {
    fileprivate func trimmingSpaces() -> String {
        String(self.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}
