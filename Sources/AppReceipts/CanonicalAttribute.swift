/// A fast path for the one shape that makes up nearly all of a receipt: an attribute
/// `SEQUENCE { INTEGER, INTEGER, OCTET STRING }` in canonical DER, read in place without building
/// a `DERReader` and three `DERElement`s per attribute (a 187-record receipt has ~3,800).
///
/// It only ever accepts a subset of what the general reader accepts, and returns what the general
/// reader would: any other encoding (long-form integer lengths, indefinite or constructed forms,
/// anything malformed) returns nil, and the caller re-reads the member with `DERReader`, which
/// produces the result or the exact error as before.
struct CanonicalAttribute {
    let type: Int64
    let version: Int64
    /// Where the OCTET STRING contents (the attribute's raw value) lie in the buffer.
    let value: Range<Int>
    /// Where the next member starts.
    let next: Int

    static func read(_ b: UnsafeBufferPointer<UInt8>, at start: Int, end: Int) -> CanonicalAttribute? {
        guard start < end, b[start] == 0x30, let (seqStart, seqEnd) = definiteLength(b, at: start + 1, end: end),
              let (type, afterType) = integer(b, at: seqStart, end: seqEnd),
              let (version, afterVersion) = integer(b, at: afterType, end: seqEnd),
              afterVersion < seqEnd, b[afterVersion] == 0x04,
              let (valueStart, valueEnd) = definiteLength(b, at: afterVersion + 1, end: seqEnd),
              valueEnd == seqEnd else { return nil }
        return CanonicalAttribute(type: type, version: version, value: valueStart..<valueEnd, next: seqEnd)
    }

    /// The content range after a definite length at `p` (short form, or minimal long form of at
    /// most 4 octets), if it fits before `end`.
    private static func definiteLength(_ b: UnsafeBufferPointer<UInt8>, at p: Int, end: Int) -> (Int, Int)? {
        guard p < end else { return nil }
        let first = b[p]
        if first < 0x80 {
            let length = Int(first)
            return length <= end - (p + 1) ? (p + 1, p + 1 + length) : nil
        }
        let count = Int(first & 0x7F)
        guard count >= 1, count <= 4, count <= end - (p + 1), b[p + 1] != 0 else { return nil }
        var length = 0
        for i in 0..<count { length = length << 8 | Int(b[p + 1 + i]) }
        let contentStart = p + 1 + count
        guard length >= 0x80, length <= end - contentStart else { return nil }
        return (contentStart, contentStart + length)
    }

    /// A primitive INTEGER with a short-form length, minimally encoded, fitting in 64 bits.
    private static func integer(_ b: UnsafeBufferPointer<UInt8>, at p: Int, end: Int) -> (Int64, Int)? {
        guard end - p >= 2, b[p] == 0x02 else { return nil }
        let length = Int(b[p + 1])
        guard length >= 1, length <= 8, length <= end - (p + 2) else { return nil }
        return integerValue(UnsafeBufferPointer(rebasing: b[(p + 2)..<(p + 2 + length)])).map { ($0, p + 2 + length) }
    }

    /// Two's complement value of 1...8 minimal content octets; nil when not minimal.
    private static func integerValue(_ c: UnsafeBufferPointer<UInt8>) -> Int64? {
        let first = c[0]
        if c.count > 1 {
            let second = c[1]
            if (first == 0x00 && second & 0x80 == 0) || (first == 0xFF && second & 0x80 != 0) { return nil }
        }
        var value: Int64 = first & 0x80 != 0 ? -1 : 0
        for byte in c { value = (value << 8) | Int64(byte) }
        return value
    }

    /// What `ReceiptAttributeValue.decode` returns for a value that is exactly one short-form
    /// INTEGER, or UTF8String/IA5String of ASCII; nil for anything else (decoded the usual way).
    static func simpleValue(_ raw: UnsafeBufferPointer<UInt8>) -> ReceiptAttributeValue? {
        if let text = asciiString(raw) {
            let s = String(decoding: text, as: UTF8.self)
            return raw[0] == 0x0C ? .utf8String(s) : .ia5String(s)
        }
        guard raw.count >= 3, raw[0] == 0x02, raw[1] < 0x80, Int(raw[1]) == raw.count - 2, raw.count - 2 <= 8,
              let v = integerValue(UnsafeBufferPointer(rebasing: raw[2...])) else { return nil }
        return .integer(v)
    }

    /// The contents of a value that is exactly one short-form UTF8String or IA5String of ASCII
    /// (what `simpleValue` decodes as a string), in place; nil for anything else.
    static func asciiString(_ raw: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8>? {
        guard raw.count >= 2, raw[0] == 0x0C || raw[0] == 0x16, raw[1] < 0x80, Int(raw[1]) == raw.count - 2 else { return nil }
        let content = UnsafeBufferPointer(rebasing: raw[2...])
        var high: UInt8 = 0
        for byte in content { high |= byte }
        return high < 0x80 ? content : nil
    }
}
