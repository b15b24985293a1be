import IAPCore

/// An attribute value as far as it decodes without knowing its meaning: Apple reserves the
/// undocumented types, so `receipt inspect` shows them without the parser failing on them.
public enum ReceiptAttributeValue: Hashable, Sendable {
    case utf8String(String)
    case ia5String(String)
    case integer(Int64)
    /// Not a single DER UTF8String/IA5String/INTEGER (opaque value, SHA-1 hash, reserved data).
    case bytes([UInt8])

    public var stringValue: String? {
        switch self {
        case .utf8String(let s), .ia5String(let s): s
        default: nil
        }
    }

    static func decode(_ raw: [UInt8]) -> ReceiptAttributeValue {
        guard var reader = try? DERReader(raw), let element = try? reader.next(), reader.isAtEnd else { return .bytes(raw) }
        switch element.tag {
        case .utf8String: if let s = try? element.string() { return .utf8String(s) }
        case .ia5String: if let s = try? element.string() { return .ia5String(s) }
        case .integer: if let i = try? element.integer() { return .integer(i) }
        default: break
        }
        return .bytes(raw)
    }
}

/// One `SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }` of a receipt payload or of
/// an in-app record, kept whole so nothing Apple put in a receipt is lost.
public struct ReceiptAttribute: Hashable, Sendable {
    public let type: Int64
    public let version: Int64
    public let rawValue: [UInt8]
    public let value: ReceiptAttributeValue

    public init(type: Int64, version: Int64, rawValue: [UInt8]) {
        self.type = type
        self.version = version
        self.rawValue = rawValue
        self.value = ReceiptAttributeValue.decode(rawValue)
    }
}

/// The attributes of one SET as spans over the bytes they were read from (the receipt payload):
/// reading a receipt copies no value and counts no reference per attribute (the 187-record
/// sandbox receipt has 3,761), and values are decoded only when asked for. Equal when the
/// attributes are, whatever buffer they lie in.
struct AttributeList: Hashable, Sendable {
    struct Span {
        let type: Int64
        let version: Int64
        /// Where the OCTET STRING contents (the raw value) lie in `bytes`.
        let value: Range<Int>
    }

    private(set) var bytes: [UInt8] = []
    private(set) var spans: [Span] = []

    init() {}

    /// Every attribute, each with its own copy of its value (inspection, JSON, equality).
    var attributes: [ReceiptAttribute] {
        spans.map { ReceiptAttribute(type: $0.type, version: $0.version, rawValue: Array(bytes[$0.value])) }
    }

    static func == (a: AttributeList, b: AttributeList) -> Bool { a.attributes == b.attributes }
    func hash(into hasher: inout Hasher) { hasher.combine(attributes) }

    /// Calls `body` with each attribute's index and type, in order, refusing as MALFORMED_RECEIPT
    /// a second attribute of a type `isSingle` says appears at most once (a documented field given
    /// twice is ambiguous; undocumented types are Apple's to repeat).
    func forEach(_ context: String, refusingRepeatsOf isSingle: (Int64) -> Bool,
                 _ body: (Int, Int64) throws(VerificationError) -> Void) throws(VerificationError) {
        var seen = DocumentedFieldSet()
        for i in spans.indices {
            let type = spans[i].type
            if isSingle(type) && !seen.insert(type) {
                throw VerificationError(.malformedReceipt, "\(context) attribute \(type) appears twice")
            }
            try body(i, type)
        }
    }

    func rawValue(_ i: Int) -> [UInt8] { Array(bytes[spans[i].value]) }

    private func withRaw<R>(_ i: Int, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        bytes.withUnsafeBufferPointer { body(UnsafeBufferPointer(rebasing: $0[spans[i].value])) }
    }

    /// What `ReceiptAttributeValue.decode` gives for attribute `i`'s raw value.
    func value(_ i: Int) -> ReceiptAttributeValue {
        withRaw(i) { CanonicalAttribute.simpleValue($0) ?? ReceiptAttributeValue.decode(Array($0)) }
    }

    func malformed(_ i: Int, _ what: String, _ context: String) -> VerificationError {
        VerificationError(.malformedReceipt, "\(context) attribute \(spans[i].type) must be \(what)")
    }

    /// A UTF8String or IA5String value.
    func string(_ i: Int, _ context: String) throws(VerificationError) -> String {
        guard let s = value(i).stringValue else { throw malformed(i, "a string", context) }
        return s
    }

    func integer(_ i: Int, _ context: String) throws(VerificationError) -> Int64 {
        guard case .integer(let v) = value(i) else { throw malformed(i, "an INTEGER", context) }
        return v
    }

    /// An RFC 3339 date in an IA5String; Apple writes an empty string for "none". A canonical
    /// ASCII string is read in place (no String per date: a record has up to five).
    func date(_ i: Int, _ context: String) throws(VerificationError) -> Int64? {
        let inPlace: Int64?? = withRaw(i) { raw in
            guard let text = CanonicalAttribute.asciiString(raw) else { return nil }
            if text.isEmpty { return .some(nil) }
            return RFC3339.milliseconds(utf8: text).map { .some($0) }
        }
        if let inPlace { return inPlace }
        // Any other encoding, and every refusal, the general way.
        let text = try string(i, context)
        if text.isEmpty { return nil }
        guard let ms = RFC3339.milliseconds(text) else {
            throw malformed(i, "an RFC 3339 date, found \"\(ClientExcerpt.of(text, limit: 40))\"", context)
        }
        return ms
    }

    /// Reads the SET of attribute sequences that `range` of `bytes` holds.
    static func read(_ bytes: [UInt8], in range: Range<Int>, context: String,
                     limits: DERLimits = DERLimits()) throws(VerificationError) -> AttributeList {
        guard range.count <= limits.maxInputBytes else {
            throw VerificationError(.inputTooLarge, "DER input of \(range.count) bytes exceeds \(limits.maxInputBytes)")
        }
        var list = AttributeList()
        list.bytes = bytes
        var outer = try DERReader(bytes: bytes, range: range, depth: 0, limits: limits)
        // The error texts are built only when needed (this runs once per in-app record).
        guard let set = try outer.readIfPresent(.set) else { _ = try outer.read(.set, "\(context) attribute SET"); return list }
        if !outer.isAtEnd { try outer.finish("\(context) attribute SET") }
        var members = try set.children()
        var spans: [Span] = []
        // One pass over the buffer in place; positions are plain integers so the loop does not
        // copy (and retain) the reader per member.
        try bytes.withUnsafeBufferPointer { (b) throws(VerificationError) in
            let end = members.endPosition
            var position = members.position
            // A capacity hint only (counting the members first was a second pass over every
            // record): Apple's attributes take 12 bytes or more; a record has about 20.
            spans.reserveCapacity(min((end - position) / 12 + 1, 64))
            while position < end {
                // Canonical members are read in place; anything else (and every error) goes
                // through the general reader below, which decides exactly as before.
                if let a = CanonicalAttribute.read(b, at: position, end: end) {
                    spans.append(Span(type: a.type, version: a.version, value: a.value))
                    position = a.next
                    continue
                }
                members.skip(to: position)
                guard let member = try members.next() else { break }
                guard member.tag == .sequence else {
                    throw DERReader.malformed("expected \(context) attribute SEQUENCE, found \(member.tag)", at: member.offset)
                }
                var fields = try member.children()
                let type = try fields.read(.integer, "attribute type").integer()
                let version = try fields.read(.integer, "attribute version").integer()
                // A primitive OCTET STRING (the tag read requires it): its contents lie in `bytes`.
                let value = try fields.read(.octetString, "attribute value")
                try fields.finish("attribute value")
                spans.append(Span(type: type, version: version, value: value.contentRange))
                position = members.position
            }
        }
        list.spans = spans
        return list
    }
}

/// Apple's receipt dates: `2024-02-23T17:27:16Z`; Xcode writes `2020-07-22T18:33:15+0100`.
/// Accepts fractional seconds and `Z`, `±HH:MM` or `±HHMM` offsets; nothing looser.
public enum RFC3339 {
    public static func milliseconds(_ text: String) -> Int64? {
        // Read in place: one Array per date was a measurable share of a 187-record receipt.
        var text = text
        return text.withUTF8 { milliseconds(utf8: $0) }
    }

    static func milliseconds(utf8 c: UnsafeBufferPointer<UInt8>) -> Int64? {
        @inline(__always) func digits(_ at: Int, _ count: Int) -> Int? {
            guard at + count <= c.count else { return nil }
            var v = 0
            for i in at..<(at + count) {
                guard c[i] >= 0x30 && c[i] <= 0x39 else { return nil }
                v = v * 10 + Int(c[i] - 0x30)
            }
            return v
        }
        guard c.count >= 20, let year = digits(0, 4), c[4] == 0x2D, let month = digits(5, 2), c[7] == 0x2D,
              let day = digits(8, 2), c[10] == 0x54 || c[10] == 0x74, let hour = digits(11, 2), c[13] == 0x3A,
              let minute = digits(14, 2), c[16] == 0x3A, let second = digits(17, 2) else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
              hour < 24, minute < 60, second < 61 else { return nil }
        var p = 19
        var millis = 0
        if p < c.count && c[p] == 0x2E {
            p += 1
            var scale = 100
            let start = p
            while p < c.count, c[p] >= 0x30 && c[p] <= 0x39 {
                millis += Int(c[p] - 0x30) * scale
                scale /= 10
                p += 1
            }
            guard p > start, p - start <= 9 else { return nil }
        }
        guard p < c.count else { return nil }
        var offsetMinutes = 0
        if c[p] == 0x5A || c[p] == 0x7A {
            p += 1
        } else if c[p] == 0x2B || c[p] == 0x2D {
            let sign = c[p] == 0x2B ? 1 : -1
            guard let oh = digits(p + 1, 2) else { return nil }
            var q = p + 3
            if q < c.count && c[q] == 0x3A { q += 1 }
            guard let om = digits(q, 2), oh < 24, om < 60 else { return nil }
            offsetMinutes = sign * (oh * 60 + om)
            p = q + 2
        } else {
            return nil
        }
        guard p == c.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = ((days * 24 + hour) * 60 + minute) * 60 + second - offsetMinutes * 60
        return Int64(seconds) * 1000 + Int64(millis)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }
}
