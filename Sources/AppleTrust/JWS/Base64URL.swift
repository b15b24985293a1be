import IAPCore

/// Strict, canonical base64 decoders for outside input.
///
/// Why strict: two encodings of the same bytes would let an attacker change a JWS segment (and the
/// cache key) without changing what it decodes to. So: exact alphabet, no whitespace, zero unused
/// trailing bits, and padding exactly as the variant requires.
public enum Base64URL {
    /// 0..63 for alphabet bytes, 0xFF otherwise. One table per variant.
    private static let urlTable: [UInt8] = makeTable(plus: UInt8(ascii: "-"), slash: UInt8(ascii: "_"))
    private static let standardTable: [UInt8] = makeTable(plus: UInt8(ascii: "+"), slash: UInt8(ascii: "/"))

    private static func makeTable(plus: UInt8, slash: UInt8) -> [UInt8] {
        var t = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8.enumerated() { t[Int(c)] = UInt8(i) }
        t[Int(plus)] = 62
        t[Int(slash)] = 63
        return t
    }

    /// base64url without padding (RFC 7515 §2), as JWS segments are encoded.
    public static func decode(_ bytes: UnsafeBufferPointer<UInt8>) throws(VerificationError) -> [UInt8] {
        guard let out = decode(unpadded: bytes, table: urlTable) else {
            throw VerificationError(.malformedBase64, "not canonical base64url")
        }
        return out
    }

    public static func decode(_ text: String) throws(VerificationError) -> [UInt8] { try decode(text[...]) }

    public static func decode(_ text: Substring) throws(VerificationError) -> [UInt8] {
        var t = text
        let out = t.withUTF8 { decode(unpadded: $0, table: urlTable) }
        guard let out else { throw VerificationError(.malformedBase64, "not canonical base64url") }
        return out
    }

    /// Standard base64 with mandatory padding (x5c entries, RFC 7515 §4.1.6).
    public static func decodeStandardPadded(_ text: String) throws(VerificationError) -> [UInt8] {
        var t = text
        let out: [UInt8]? = t.withUTF8 { buf in
            guard buf.count % 4 == 0 else { return nil }
            var n = buf.count
            if n >= 1, buf[n - 1] == UInt8(ascii: "=") { n -= 1 }
            if n >= 1, buf[n - 1] == UInt8(ascii: "=") { n -= 1 }
            return decode(unpadded: UnsafeBufferPointer(rebasing: buf[0..<n]), table: standardTable)
        }
        guard let out else { throw VerificationError(.malformedBase64, "not canonical padded base64") }
        return out
    }

    /// Encoding (JWS signing in tests, the simulator, JWT).
    public static func encode<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        return encode(Array(bytes), alphabet: alphabet, pad: false)
    }

    public static func encodeStandardPadded<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        return encode(Array(bytes), alphabet: alphabet, pad: true)
    }

    private static func encode(_ b: [UInt8], alphabet: [UInt8], pad: Bool) -> String {
        var out = [UInt8]()
        out.reserveCapacity((b.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= b.count {
            let v = UInt32(b[i]) << 16 | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2])
            out += [alphabet[Int(v >> 18 & 63)], alphabet[Int(v >> 12 & 63)], alphabet[Int(v >> 6 & 63)], alphabet[Int(v & 63)]]
            i += 3
        }
        let rest = b.count - i
        if rest == 1 {
            let v = UInt32(b[i]) << 16
            out += [alphabet[Int(v >> 18 & 63)], alphabet[Int(v >> 12 & 63)]]
            if pad { out += Array("==".utf8) }
        } else if rest == 2 {
            let v = UInt32(b[i]) << 16 | UInt32(b[i + 1]) << 8
            out += [alphabet[Int(v >> 18 & 63)], alphabet[Int(v >> 12 & 63)], alphabet[Int(v >> 6 & 63)]]
            if pad { out += Array("=".utf8) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Core decoder over unpadded input; nil when not canonical.
    private static func decode(unpadded buf: UnsafeBufferPointer<UInt8>, table: [UInt8]) -> [UInt8]? {
        let n = buf.count
        guard n % 4 != 1 else { return nil }
        var out = [UInt8](repeating: 0, count: n / 4 * 3 + (n % 4 == 0 ? 0 : n % 4 - 1))
        return table.withUnsafeBufferPointer { t -> [UInt8]? in
            out.withUnsafeMutableBufferPointer { o -> Bool in
                var i = 0, j = 0
                while i + 4 <= n {
                    let a = t[Int(buf[i])], b = t[Int(buf[i + 1])], c = t[Int(buf[i + 2])], d = t[Int(buf[i + 3])]
                    guard (a | b | c | d) & 0xC0 == 0 else { return false }
                    let v = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    o[j] = UInt8(truncatingIfNeeded: v >> 16)
                    o[j + 1] = UInt8(truncatingIfNeeded: v >> 8)
                    o[j + 2] = UInt8(truncatingIfNeeded: v)
                    i += 4; j += 3
                }
                switch n - i {
                case 2:
                    let a = t[Int(buf[i])], b = t[Int(buf[i + 1])]
                    guard (a | b) & 0xC0 == 0, b & 0x0F == 0 else { return false }
                    o[j] = a << 2 | b >> 4
                case 3:
                    let a = t[Int(buf[i])], b = t[Int(buf[i + 1])], c = t[Int(buf[i + 2])]
                    guard (a | b | c) & 0xC0 == 0, c & 0x03 == 0 else { return false }
                    o[j] = a << 2 | b >> 4
                    o[j + 1] = b << 4 | c >> 2
                default: break
                }
                return true
            } ? out : nil
        }
    }
}
