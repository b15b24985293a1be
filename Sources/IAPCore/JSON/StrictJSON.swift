/// A strict RFC 8259 JSON parser for outside input.
///
/// Why not `JSONSerialization`/`JSONDecoder`: they silently keep one of two duplicate keys (an
/// attacker's choice of which), coerce numbers, and cannot bound nesting. This parser refuses
/// duplicate keys (`DUPLICATE_JSON_KEY`), trailing garbage, leading zeros, control characters in
/// strings, lone surrogates, nesting beyond `maxDepth`, and input beyond `maxBytes`.
public struct StrictJSON: Sendable {
    public var maxBytes: Int
    public var maxDepth: Int

    public init(maxBytes: Int = 1 << 20, maxDepth: Int = 32) {
        self.maxBytes = maxBytes
        self.maxDepth = maxDepth
    }

    public func parse<Bytes: Collection<UInt8>>(_ bytes: Bytes) throws(VerificationError) -> JSONValue {
        // Contiguous input is read in place rather than copied.
        if let result = bytes.withContiguousStorageIfAvailable({ buf in
            Result { () throws(VerificationError) -> JSONValue in try parse(buffer: buf) }
        }) {
            return try result.get()
        }
        guard bytes.count <= maxBytes else {
            throw VerificationError(.inputTooLarge, "JSON of \(bytes.count) bytes exceeds the \(maxBytes)-byte limit")
        }
        let array = Array(bytes)
        return try array.withUnsafeBufferPointer { (buf) throws(VerificationError) -> JSONValue in try parse(buffer: buf) }
    }

    /// The same for an array (a decoded JWS payload), without going through the generic entry:
    /// called from another module that one is not specialised, and its dispatch showed in profiles.
    public func parse(_ bytes: [UInt8]) throws(VerificationError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { (buf) throws(VerificationError) -> JSONValue in try parse(buffer: buf) }
    }

    private func parse(buffer buf: UnsafeBufferPointer<UInt8>) throws(VerificationError) -> JSONValue {
        guard buf.count <= maxBytes else {
            throw VerificationError(.inputTooLarge, "JSON of \(buf.count) bytes exceeds the \(maxBytes)-byte limit")
        }
        var reader = Reader(buf: buf, maxDepth: maxDepth)
        reader.skipWhitespace()
        let value = try reader.value(depth: 0)
        reader.skipWhitespace()
        guard reader.pos == buf.count else { throw reader.fail("trailing characters after the JSON value") }
        return value
    }

    public func parse(_ text: String) throws(VerificationError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    private struct Reader {
        let buf: UnsafeBufferPointer<UInt8>
        let maxDepth: Int
        var pos = 0

        init(buf: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
            self.buf = buf
            self.maxDepth = maxDepth
        }

        func fail(_ why: String) -> VerificationError {
            VerificationError(.malformedJSON, "\(why) at byte \(pos)")
        }

        mutating func skipWhitespace() {
            while pos < buf.count {
                switch buf[pos] {
                case 0x20, 0x09, 0x0A, 0x0D: pos += 1
                default: return
                }
            }
        }

        mutating func expect(_ literal: StaticString, _ result: JSONValue) throws(VerificationError) -> JSONValue {
            let count = literal.utf8CodeUnitCount
            guard pos + count <= buf.count else { throw fail("truncated literal") }
            let lit = literal.utf8Start
            for i in 0..<count where buf[pos + i] != lit[i] { throw fail("invalid literal") }
            pos += count
            return result
        }

        mutating func value(depth: Int) throws(VerificationError) -> JSONValue {
            guard pos < buf.count else { throw fail("unexpected end of input") }
            switch buf[pos] {
            case UInt8(ascii: "{"): return try object(depth: depth + 1)
            case UInt8(ascii: "["): return try array(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): return try expect("true", .bool(true))
            case UInt8(ascii: "f"): return try expect("false", .bool(false))
            case UInt8(ascii: "n"): return try expect("null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
            default: throw fail("unexpected character")
            }
        }

        mutating func object(depth: Int) throws(VerificationError) -> JSONValue {
            guard depth <= maxDepth else { throw fail("nesting deeper than \(maxDepth)") }
            pos += 1
            var result: [String: JSONValue] = [:]
            skipWhitespace()
            if pos < buf.count, buf[pos] == UInt8(ascii: "}") { pos += 1; return .object(result) }
            // Apple's payloads carry ~10-30 keys at the top: skip the first few rehashing
            // growths there. Only there: reserving for every nested object would let a body of
            // many tiny objects cost far more memory than its size.
            if depth == 1 { result.reserveCapacity(16) }
            while true {
                skipWhitespace()
                guard pos < buf.count, buf[pos] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
                let keyStart = pos
                let key = try string()
                skipWhitespace()
                guard pos < buf.count, buf[pos] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                pos += 1
                skipWhitespace()
                let v = try value(depth: depth)
                if result.updateValue(v, forKey: key) != nil {
                    throw VerificationError(.duplicateJSONKey, "duplicate key \"\(ClientExcerpt.of(key))\" at byte \(keyStart)")
                }
                skipWhitespace()
                guard pos < buf.count else { throw fail("unterminated object") }
                if buf[pos] == UInt8(ascii: ",") { pos += 1; continue }
                if buf[pos] == UInt8(ascii: "}") { pos += 1; return .object(result) }
                throw fail("expected ',' or '}'")
            }
        }

        mutating func array(depth: Int) throws(VerificationError) -> JSONValue {
            guard depth <= maxDepth else { throw fail("nesting deeper than \(maxDepth)") }
            pos += 1
            var result: [JSONValue] = []
            skipWhitespace()
            if pos < buf.count, buf[pos] == UInt8(ascii: "]") { pos += 1; return .array(result) }
            while true {
                skipWhitespace()
                result.append(try value(depth: depth))
                skipWhitespace()
                guard pos < buf.count else { throw fail("unterminated array") }
                if buf[pos] == UInt8(ascii: ",") { pos += 1; continue }
                if buf[pos] == UInt8(ascii: "]") { pos += 1; return .array(result) }
                throw fail("expected ',' or ']'")
            }
        }

        mutating func hex4() throws(VerificationError) -> UInt32 {
            guard pos + 4 <= buf.count else { throw fail("truncated \\u escape") }
            var v: UInt32 = 0
            for _ in 0..<4 {
                let c = buf[pos]
                let d: UInt32
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
                default: throw fail("invalid \\u escape")
                }
                v = v << 4 | d
                pos += 1
            }
            return v
        }

        mutating func string() throws(VerificationError) -> String {
            pos += 1  // opening quote
            let start = pos
            // Fast path: no escapes. ASCII (nearly every string Apple signs) needs no UTF-8
            // validation beyond the bytes seen here.
            var high: UInt8 = 0
            while pos < buf.count {
                let c = buf[pos]
                high |= c
                if c == UInt8(ascii: "\"") {
                    let slice = UnsafeBufferPointer(rebasing: buf[start..<pos])
                    pos += 1
                    if high < 0x80 { return String(decoding: slice, as: UTF8.self) }
                    guard let s = String(validating: slice, as: UTF8.self) else {
                        throw fail("invalid UTF-8 in string")
                    }
                    return s
                }
                if c == UInt8(ascii: "\\") { break }
                if c < 0x20 { throw fail("control character in string") }
                pos += 1
            }
            var bytes = Array(buf[start..<pos])
            while pos < buf.count {
                let c = buf[pos]
                if c == UInt8(ascii: "\"") {
                    pos += 1
                    guard let s = String(validating: bytes, as: UTF8.self) else { throw fail("invalid UTF-8 in string") }
                    return s
                }
                if c < 0x20 { throw fail("control character in string") }
                if c != UInt8(ascii: "\\") { bytes.append(c); pos += 1; continue }
                pos += 1
                guard pos < buf.count else { break }
                let e = buf[pos]
                pos += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): bytes.append(e)
                case UInt8(ascii: "b"): bytes.append(0x08)
                case UInt8(ascii: "f"): bytes.append(0x0C)
                case UInt8(ascii: "n"): bytes.append(0x0A)
                case UInt8(ascii: "r"): bytes.append(0x0D)
                case UInt8(ascii: "t"): bytes.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard pos + 2 <= buf.count, buf[pos] == UInt8(ascii: "\\"), buf[pos + 1] == UInt8(ascii: "u") else {
                            throw fail("lone surrogate")
                        }
                        pos += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("lone surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw fail("lone surrogate")
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                    bytes.append(contentsOf: Array(String(Character(u)).utf8))
                default: throw fail("invalid escape")
                }
            }
            throw fail("unterminated string")
        }

        mutating func number() throws(VerificationError) -> JSONValue {
            let start = pos
            var isInteger = true
            if buf[pos] == UInt8(ascii: "-") { pos += 1 }
            guard pos < buf.count, isDigit(buf[pos]) else { throw fail("invalid number") }
            if buf[pos] == UInt8(ascii: "0") {
                pos += 1
                if pos < buf.count, isDigit(buf[pos]) { throw fail("leading zero in number") }
            } else {
                while pos < buf.count, isDigit(buf[pos]) { pos += 1 }
            }
            if pos < buf.count, buf[pos] == UInt8(ascii: ".") {
                isInteger = false
                pos += 1
                guard pos < buf.count, isDigit(buf[pos]) else { throw fail("invalid fraction") }
                while pos < buf.count, isDigit(buf[pos]) { pos += 1 }
            }
            if pos < buf.count, buf[pos] == UInt8(ascii: "e") || buf[pos] == UInt8(ascii: "E") {
                isInteger = false
                pos += 1
                if pos < buf.count, buf[pos] == UInt8(ascii: "+") || buf[pos] == UInt8(ascii: "-") { pos += 1 }
                guard pos < buf.count, isDigit(buf[pos]) else { throw fail("invalid exponent") }
                while pos < buf.count, isDigit(buf[pos]) { pos += 1 }
            }
            // Up to 18 digits cannot overflow Int64: accumulate directly instead of via a String.
            let negative = buf[start] == UInt8(ascii: "-")
            let digitsStart = negative ? start + 1 : start
            if isInteger && pos - digitsStart <= 18 {
                var v: Int64 = 0
                for i in digitsStart..<pos { v = v &* 10 &+ Int64(buf[i] &- UInt8(ascii: "0")) }
                return .int(negative ? -v : v)
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: buf[start..<pos]), as: UTF8.self)
            if isInteger {
                guard let i = Int64(text) else { throw fail("integer out of range") }
                return .int(i)
            }
            guard let d = Double(text), d.isFinite else { throw fail("number out of range") }
            return .double(d)
        }

        func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }
    }
}

extension JSONValue {
    /// Compact JSON text with keys sorted (stable bytes for output, audit and golden files).
    public var jsonText: String { String(decoding: jsonBytes, as: UTF8.self) }

    /// The same document as UTF-8 bytes, written byte by byte into one buffer (what an HTTP answer
    /// sends): String appends and the copy into a body were a visible share of a /verify answer.
    public var jsonBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        write(to: &out)
        return out
    }

    public func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): Self.writeInteger(i, to: &out)
        case .double(let d): out.append(contentsOf: "\(d)".utf8)
        case .string(let s): Self.writeString(s, to: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, v) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                v.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            // Sorted as pairs: no second hash lookup of each key.
            for (i, (k, v)) in o.sorted(by: { $0.key < $1.key }).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                Self.writeString(k, to: &out)
                out.append(UInt8(ascii: ":"))
                v.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Decimal digits straight into the buffer (the same text as `String(i)`).
    static func writeInteger(_ i: Int64, to out: inout [UInt8]) {
        if i < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = i.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for Int64.min's 19 digits
        withUnsafeMutableBytes(of: &digits) { buffer in
            var start = buffer.count
            repeat {
                start -= 1
                buffer[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            out.append(contentsOf: buffer[start...])
        }
    }

    static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Almost every string written (ids, dates, JWS, product ids) needs no escaping: its bytes are
        // scanned and appended whole, through the string's own buffer (`contains(where:)` and
        // `append(contentsOf:)` on the UTF8View walked it index by index, ~2% of a re-claim's CPU).
        let utf8 = s.utf8
        let appended = utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            for b in bytes where b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") { return false }
            out.append(contentsOf: bytes)
            return true
        }
        if appended == true {
            out.append(UInt8(ascii: "\""))
            return
        }
        for b in utf8 {
            switch b {
            case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
            case UInt8(ascii: "\n"): out.append(contentsOf: #"\n"#.utf8)
            case UInt8(ascii: "\r"): out.append(contentsOf: #"\r"#.utf8)
            case UInt8(ascii: "\t"): out.append(contentsOf: #"\t"#.utf8)
            case _ where b < 0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: #"\u00"#.utf8)
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 0xF)])
            default: out.append(b)  // bytes of multi-byte scalars pass through unchanged
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
