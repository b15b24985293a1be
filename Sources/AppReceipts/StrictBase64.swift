import IAPCore

/// Standard base64 (RFC 4648 §4) decoded strictly: the standard alphabet only, padding required,
/// unused bits zero. Receipts sometimes arrive line-wrapped, so CR and LF are skipped; any other
/// whitespace or character is MALFORMED_BASE64.
public enum StrictBase64 {
    /// 1 MiB of text: the 187-record legacy sandbox receipt is about 105 KB.
    public static let defaultMaxInputBytes = 1 << 20

    public static func decode(_ text: String, maxInputBytes: Int = defaultMaxInputBytes) throws(VerificationError) -> [UInt8] {
        let utf8 = text.utf8
        guard utf8.count <= maxInputBytes else {
            throw VerificationError(.inputTooLarge, "base64 input of \(utf8.count) bytes exceeds \(maxInputBytes)")
        }
        var symbols: [UInt8] = []
        symbols.reserveCapacity(utf8.count)
        for (index, c) in utf8.enumerated() {
            if c == 0x0D || c == 0x0A { continue }
            guard c == 0x3D || value(of: c) != nil else {
                throw VerificationError(.malformedBase64, "character at offset \(index) is not standard base64")
            }
            symbols.append(c)
        }
        guard !symbols.isEmpty else { throw VerificationError(.malformedBase64, "empty base64 input") }
        guard symbols.count % 4 == 0 else {
            throw VerificationError(.malformedBase64, "base64 length \(symbols.count) is not a multiple of 4 (padding required)")
        }
        let padding = symbols.reversed().prefix { $0 == 0x3D }.count
        guard padding <= 2, !symbols.dropLast(padding).contains(0x3D) else {
            throw VerificationError(.malformedBase64, "misplaced base64 padding")
        }
        var out: [UInt8] = []
        out.reserveCapacity(symbols.count / 4 * 3)
        var i = 0
        while i < symbols.count {
            let isLast = i + 4 == symbols.count
            let a = value(of: symbols[i])!, b = value(of: symbols[i + 1])!
            out.append(a << 2 | b >> 4)
            if isLast && padding == 2 {
                guard b & 0x0F == 0 else { throw VerificationError(.malformedBase64, "non-zero unused bits before padding") }
                break
            }
            let c = value(of: symbols[i + 2])!
            out.append(b << 4 | c >> 2)
            if isLast && padding == 1 {
                guard c & 0x03 == 0 else { throw VerificationError(.malformedBase64, "non-zero unused bits before padding") }
                break
            }
            out.append(c << 6 | value(of: symbols[i + 3])!)
            i += 4
        }
        return out
    }

    private static func value(of c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): c - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): c - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }
}
