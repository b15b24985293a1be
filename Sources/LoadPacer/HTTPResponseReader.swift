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

    /// The status line and the headers that delimit the body (CRLF CRLF included in `bytes`). On
    /// bytes, not Strings: the generator reads every response, and its CPU is taken from the server
    /// it measures.
    static func parseHeader(_ bytes: [UInt8], maxBodyBytes: Int) throws(ReadError) -> (Response, Int) {
        var status = 0
        var closes = false
        var length: Int?
        var start = 0
        // Lines end with CRLF; the last one, empty, at count - 2.
        while start < bytes.count - 2 {
            var end = start
            while !(bytes[end] == 0x0D && bytes[end + 1] == 0x0A) { end += 1 }
            let line = bytes[start..<end]
            if start == 0 {
                guard line.count >= 12, line.starts(with: "HTTP/1.".utf8), line[8] == 0x20,
                    line[7] == 0x31 || line[7] == 0x30, line.count == 12 || line[12] == 0x20,
                    let code = Self.decimal(line[9..<12]), (200...599).contains(code)
                else { throw .malformed("status line") }
                status = code
                closes = line[7] == 0x30  // HTTP/1.0 closes unless it says keep-alive
            } else {
                guard let colon = line.firstIndex(of: 0x3A), colon != line.startIndex else { throw .malformed("header line") }
                let name = line[..<colon]
                let value = Self.trimmed(line[(colon + 1)...])
                if Self.same(name, "content-length") {
                    guard value.count <= 18, let n = Self.decimal(value) else { throw .malformed("Content-Length") }
                    guard length == nil || length == n else { throw .malformed("conflicting Content-Length") }
                    guard n <= maxBodyBytes else { throw .bodyTooLarge(declared: n, limit: maxBodyBytes) }
                    length = n
                } else if Self.same(name, "transfer-encoding") {
                    throw .unsupported("Transfer-Encoding \(String(decoding: value, as: UTF8.self))")
                } else if Self.same(name, "connection") {
                    for token in value.split(separator: 0x2C) {
                        if Self.same(Self.trimmed(token), "close") { closes = true }
                        if Self.same(Self.trimmed(token), "keep-alive") && bytes[7] == 0x30 { closes = false }
                    }
                }
            }
            start = end + 2
        }
        if status == 204 || status == 304 { return (Response(status: status, closesConnection: closes), 0) }
        guard let length else { throw .unsupported("no Content-Length (a kept-alive response must say where it ends)") }
        return (Response(status: status, closesConnection: closes), length)
    }

    /// Digits only (no sign, no space), at least one.
    private static func decimal(_ digits: ArraySlice<UInt8>) -> Int? {
        guard !digits.isEmpty else { return nil }
        var n = 0
        for d in digits {
            guard d >= 0x30 && d <= 0x39 else { return nil }
            n = n * 10 + Int(d - 0x30)
        }
        return n
    }

    private static func trimmed(_ text: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var text = text
        while let first = text.first, first == 0x20 || first == 0x09 { text = text.dropFirst() }
        while let last = text.last, last == 0x20 || last == 0x09 { text = text.dropLast() }
        return text
    }

    /// ASCII case-insensitive equality with a lower-case name.
    private static func same(_ text: ArraySlice<UInt8>, _ lower: StaticString) -> Bool {
        guard text.count == lower.utf8CodeUnitCount else { return false }
        let expected = UnsafeBufferPointer(start: lower.utf8Start, count: lower.utf8CodeUnitCount)
        for (byte, want) in zip(text, expected) {
            let folded: UInt8 = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
            if folded != want { return false }
        }
        return true
    }
}
