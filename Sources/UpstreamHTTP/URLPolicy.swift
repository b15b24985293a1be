import CCurl
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Decides whether a URL may be fetched, before curl sees it: https anywhere, plain http only to
/// loopback (or anywhere for a client configured `allowsPlainHTTPToAnyHost`).
/// Parsing uses curl's own URL parser so the host we judge is exactly the host curl would connect to.
enum URLPolicy {
    struct Target {
        /// curl's normalised rendering of the URL; this string (not the caller's) is what gets fetched.
        let normalizedURL: String
        let host: String
    }

    static func check(_ url: String, plainHTTPToAnyHost: Bool = false) throws(UpstreamError) -> Target {
        guard let handle = curl_url() else { throw .transport("curl_url() failed") }
        defer { curl_url_cleanup(handle) }
        let rc = curl_url_set(handle, CURLUPART_URL, url, 0)
        guard rc == CURLUE_OK else {
            throw .invalidURL(String(cString: curl_url_strerror(rc)))
        }
        guard let scheme = part(handle, CURLUPART_SCHEME)?.lowercased() else { throw .invalidURL("no scheme") }
        guard let host = part(handle, CURLUPART_HOST), !host.isEmpty else { throw .invalidURL("no host") }
        // Credentials in a URL end up in places URLs go (logs, errors); callers use headers instead.
        if part(handle, CURLUPART_USER) != nil || part(handle, CURLUPART_PASSWORD) != nil {
            throw .invalidURL("credentials in the URL are not accepted")
        }
        switch scheme {
        case "https":
            break
        case "http":
            guard plainHTTPToAnyHost || isLoopback(host: host) else { throw .insecureScheme(host: host) }
        default:
            throw .invalidURL("scheme \(scheme) is not http or https")
        }
        guard let normalized = part(handle, CURLUPART_URL) else { throw .invalidURL("cannot render URL") }
        return Target(normalizedURL: normalized, host: host)
    }

    /// 127.0.0.0/8, ::1 and the name "localhost" (curl ≥ 7.78 resolves it to loopback without DNS).
    static func isLoopback(host: String) -> Bool {
        let lowered = host.lowercased()
        if lowered == "localhost" { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, lowered, &v4) == 1 {
            return UInt32(bigEndian: v4.s_addr) >> 24 == 127
        }
        if lowered.hasPrefix("["), lowered.hasSuffix("]") {
            var v6 = in6_addr()
            let inner = String(lowered.dropFirst().dropLast())
            guard inet_pton(AF_INET6, inner, &v6) == 1 else { return false }
            return withUnsafeBytes(of: &v6) { Array($0) } == [UInt8](repeating: 0, count: 15) + [1]
        }
        return false
    }

    private static func part(_ handle: OpaquePointer, _ which: CURLUPart) -> String? {
        var out: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, which, &out, 0) == CURLUE_OK, let out else { return nil }
        defer { curl_free(out) }
        return String(cString: out)
    }
}

/// Header names are RFC 9110 tokens; values may not contain CR, LF or NUL (they would split the request).
enum HeaderPolicy {
    static func check(_ headers: [(String, String)]) throws(UpstreamError) {
        for (name, value) in headers {
            let nameOK = !name.isEmpty && name.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
            let valueOK = !value.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }
            guard nameOK, valueOK else { throw .invalidHeader(name: nameOK ? name : "(malformed name)") }
        }
    }

    static func checkMethod(_ method: String) throws(UpstreamError) {
        guard !method.isEmpty, method.utf8.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A) || $0 == 0x2D }) else {
            throw .invalidHeader(name: "(request method)")
        }
    }
}
