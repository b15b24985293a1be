import IAPCore

/// The subset of NeXT-style property lists that iOS 6 `transactionReceipt`s use: one dictionary of
/// quoted string keys and quoted string values, `"key" = "value";`. Anything else (unquoted words,
/// nested containers, comments, duplicate keys, trailing content) is MALFORMED_RECEIPT, where
/// Foundation's old-style parser would guess.
public enum OldStylePlist {
    public static let defaultMaxBytes = 256 * 1024

    public static func parseDictionary(_ bytes: [UInt8], maxBytes: Int = defaultMaxBytes) throws(VerificationError) -> [String: String] {
        guard bytes.count <= maxBytes else {
            throw VerificationError(.inputTooLarge, "property list of \(bytes.count) bytes exceeds \(maxBytes)")
        }
        var p = 0
        func fail(_ message: String) -> VerificationError {
            VerificationError(.malformedReceipt, "old-style plist: \(message) at offset \(p)")
        }
        func skipSpace() {
            while p < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[p]) { p += 1 }
        }
        func expect(_ c: UInt8) throws(VerificationError) {
            skipSpace()
            guard p < bytes.count, bytes[p] == c else { throw fail("expected '\(Character(Unicode.Scalar(c)))'") }
            p += 1
        }
        func quoted() throws(VerificationError) -> String {
            try expect(0x22)
            var out: [UInt8] = []
            while true {
                guard p < bytes.count else { throw fail("unterminated string") }
                let c = bytes[p]
                p += 1
                if c == 0x22 { break }
                if c == 0x5C {
                    guard p < bytes.count else { throw fail("unterminated escape") }
                    let e = bytes[p]
                    p += 1
                    switch e {
                    case 0x22, 0x5C: out.append(e)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    default: throw fail("unsupported escape")
                    }
                } else {
                    out.append(c)
                }
            }
            guard let s = String(validating: out, as: UTF8.self) else { throw fail("string is not valid UTF-8") }
            return s
        }

        var result: [String: String] = [:]
        try expect(0x7B)
        while true {
            skipSpace()
            guard p < bytes.count else { throw fail("unterminated dictionary") }
            if bytes[p] == 0x7D { p += 1; break }
            let key = try quoted()
            try expect(0x3D)
            let value = try quoted()
            try expect(0x3B)
            guard result.updateValue(value, forKey: key) == nil else { throw fail("duplicate key \"\(ClientExcerpt.of(key, limit: 40))\"") }
        }
        skipSpace()
        guard p == bytes.count else { throw fail("unexpected data after the dictionary") }
        return result
    }
}
