/// Where the generator sends: an `http://` URL whose host is the loopback address itself
/// (127.0.0.1 or [::1]), never a name to resolve and never another machine: a benchmark that could
/// be pointed elsewhere would be a load generator against someone else's service.
public struct LoopbackTarget: Equatable, Sendable {
    public enum Family: Sendable { case ipv4, ipv6 }
    public let family: Family
    public let port: UInt16
    /// The request target: path and query, "/" when the URL has none.
    public let path: String
    /// The Host header's value, as the URL wrote it.
    public let host: String

    public struct Refused: Error, Equatable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    public init(url: String) throws(Refused) {
        guard url.hasPrefix("http://") else { throw Refused(reason: "only http:// URLs on loopback (127.0.0.1 or [::1])") }
        let rest = url.dropFirst("http://".count)
        let authority = rest.prefix(while: { $0 != "/" && $0 != "?" && $0 != "#" })
        let target = rest.dropFirst(authority.count)
        guard !target.contains("#") else { throw Refused(reason: "a URL fragment is not sent: drop it") }
        let hostPart: Substring
        let portPart: Substring
        if authority.hasPrefix("[::1]") {
            family = .ipv6
            hostPart = authority.prefix(5)
            portPart = authority.dropFirst(5)
        } else if authority.hasPrefix("127.0.0.1") {
            family = .ipv4
            hostPart = authority.prefix(9)
            portPart = authority.dropFirst(9)
        } else {
            throw Refused(reason: "\(authority) is not 127.0.0.1 or [::1]: the generator sends to loopback only")
        }
        guard portPart.hasPrefix(":"), let port = UInt16(portPart.dropFirst()), port > 0 else {
            throw Refused(reason: "the URL needs an explicit port after \(hostPart)")
        }
        self.port = port
        self.host = String(authority)
        self.path = target.isEmpty ? "/" : (target.hasPrefix("?") ? "/" + target : String(target))
    }

    /// The bytes of one request, the same for every request of a run. Headers are "Name: value"
    /// lines; CR or LF inside one would smuggle another header or request, so they are refused.
    public func request(method: String, headers: [String], body: [UInt8]) throws(Refused) -> [UInt8] {
        let head = try self.head(method: method, headers: headers)
        return body.withUnsafeBytes { head.request(body: $0) }
    }

    /// What every request of a run shares when only the bodies differ (`BodiesFile`): checked once.
    public struct Head: Sendable {
        let lines: [UInt8]
        let sendsLength: Bool

        /// The request with `body`: the shared lines, then its Content-Length.
        public func request(body: UnsafeRawBufferPointer) -> [UInt8] {
            var bytes = lines
            if body.count > 0 || sendsLength { bytes += Array("Content-Length: \(body.count)\r\n".utf8) }
            bytes += Array("\r\n".utf8)
            bytes += body
            return bytes
        }
    }

    public func head(method: String, headers: [String]) throws(Refused) -> Head {
        guard !method.isEmpty, method.utf8.allSatisfy({ $0 >= 0x41 && $0 <= 0x5A }) else {
            throw Refused(reason: "the method must be upper-case letters")
        }
        var text = "\(method) \(path) HTTP/1.1\r\nHost: \(host)\r\n"
        for header in headers {
            // On bytes: in a Swift String "\r\n" is one Character, which contains("\r") does not match.
            guard !header.utf8.contains(0x0D), !header.utf8.contains(0x0A),
                let colon = header.firstIndex(of: ":"), colon != header.startIndex
            else { throw Refused(reason: "a header is one line, \"Name: value\"") }
            let name = header[..<colon].lowercased()
            guard name != "content-length", name != "host", name != "transfer-encoding", name != "connection" else {
                throw Refused(reason: "\(header[..<colon]) is the generator's to set")
            }
            text += header + "\r\n"
        }
        return Head(lines: Array(text.utf8), sendsLength: method == "POST" || method == "PUT")
    }
}
