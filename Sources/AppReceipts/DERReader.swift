import IAPCore

/// The identifier octets of a BER/DER element.
public struct DERTag: Hashable, Sendable, CustomStringConvertible {
    public enum TagClass: UInt8, Sendable { case universal = 0, application = 1, contextSpecific = 2, privateUse = 3 }

    public let tagClass: TagClass
    public let constructed: Bool
    public let number: UInt32

    public init(_ tagClass: TagClass, _ number: UInt32, constructed: Bool) {
        self.tagClass = tagClass
        self.number = number
        self.constructed = constructed
    }

    public static let integer = DERTag(.universal, 2, constructed: false)
    public static let octetString = DERTag(.universal, 4, constructed: false)
    public static let null = DERTag(.universal, 5, constructed: false)
    public static let objectIdentifier = DERTag(.universal, 6, constructed: false)
    public static let utf8String = DERTag(.universal, 12, constructed: false)
    public static let ia5String = DERTag(.universal, 22, constructed: false)
    public static let sequence = DERTag(.universal, 16, constructed: true)
    public static let set = DERTag(.universal, 17, constructed: true)
    public static func context(_ number: UInt32, constructed: Bool = true) -> DERTag {
        DERTag(.contextSpecific, number, constructed: constructed)
    }

    public var description: String {
        let kind = ["UNIVERSAL", "APPLICATION", "CONTEXT", "PRIVATE"][Int(tagClass.rawValue)]
        return "[\(kind) \(number)\(constructed ? " constructed" : "")]"
    }
}

/// One element: its tag and where its contents lie in the shared buffer. For an indefinite-length
/// element the contents stop before the end-of-contents octets.
public struct DERElement: Sendable {
    public let tag: DERTag
    /// Offset of the identifier octet, for error messages.
    public let offset: Int
    public let contentRange: Range<Int>
    public let indefiniteLength: Bool
    let bytes: [UInt8]
    let depth: Int
    let limits: DERLimits

    public var content: ArraySlice<UInt8> { bytes[contentRange] }

    /// A reader over the children of a constructed element.
    public func children() throws(VerificationError) -> DERReader {
        guard tag.constructed else { throw DERReader.malformed("expected a constructed element, found primitive \(tag)", at: offset) }
        return try DERReader(bytes: bytes, range: contentRange, depth: depth + 1, limits: limits)
    }

    private func expect(_ expected: DERTag, _ what: String) throws(VerificationError) {
        guard tag == expected else { throw DERReader.malformed("expected \(what), found \(tag)", at: offset) }
    }

    /// The bytes as a String when every one is 7-bit ASCII; nil otherwise.
    static func asciiString(_ bytes: ArraySlice<UInt8>) -> String? {
        bytes.withUnsafeBufferPointer { b -> String? in
            var high: UInt8 = 0
            for byte in b { high |= byte }
            return high < 0x80 ? String(decoding: b, as: UTF8.self) : nil
        }
    }

    /// A signed INTEGER that fits in 64 bits; non-minimal encodings are refused.
    public func integer() throws(VerificationError) -> Int64 {
        try expect(.integer, "INTEGER")
        let c = content
        guard let first = c.first else { throw DERReader.malformed("empty INTEGER", at: offset) }
        if c.count > 1 {
            let second = c[c.startIndex + 1]
            if (first == 0x00 && second & 0x80 == 0) || (first == 0xFF && second & 0x80 != 0) {
                throw DERReader.malformed("INTEGER not minimally encoded", at: offset)
            }
        }
        guard c.count <= 8 else { throw DERReader.malformed("INTEGER wider than 64 bits", at: offset) }
        var value: Int64 = first & 0x80 != 0 ? -1 : 0
        for byte in c { value = (value << 8) | Int64(byte) }
        return value
    }

    /// OCTET STRING contents; a constructed (BER) octet string is the concatenation of its parts.
    public func octetString() throws(VerificationError) -> [UInt8] {
        guard tag.tagClass == .universal, tag.number == 4 else {
            throw DERReader.malformed("expected OCTET STRING, found \(tag)", at: offset)
        }
        if !tag.constructed { return content.withUnsafeBufferPointer { Array($0) } }
        var joined: [UInt8] = []
        var parts = try children()
        while let part = try parts.next() { joined += try part.octetString() }
        return joined
    }

    /// The dotted form of an OBJECT IDENTIFIER.
    public func objectIdentifier() throws(VerificationError) -> String {
        try expect(.objectIdentifier, "OBJECT IDENTIFIER")
        guard !content.isEmpty else { throw DERReader.malformed("empty OBJECT IDENTIFIER", at: offset) }
        var arcs: [UInt64] = []
        var current: UInt64 = 0
        var startOfArc = true
        for byte in content {
            if startOfArc && byte == 0x80 { throw DERReader.malformed("OID arc not minimally encoded", at: offset) }
            guard current >> 57 == 0 else { throw DERReader.malformed("OID arc too large", at: offset) }
            current = (current << 7) | UInt64(byte & 0x7F)
            startOfArc = byte & 0x80 == 0
            if startOfArc { arcs.append(current); current = 0 }
        }
        guard startOfArc else { throw DERReader.malformed("OID ends inside an arc", at: offset) }
        let first = arcs[0]
        let head: [UInt64] = first < 40 ? [0, first] : first < 80 ? [1, first - 40] : [2, first - 80]
        return (head + arcs.dropFirst()).map(String.init).joined(separator: ".")
    }

    /// UTF8String (validated UTF-8) or IA5String (7-bit ASCII).
    public func string() throws(VerificationError) -> String {
        switch tag {
        case .utf8String:
            // ASCII (nearly every receipt string) is valid UTF-8 as is; only other text takes
            // the slower validating initialiser.
            if let s = Self.asciiString(content) { return s }
            guard let s = String(validating: content, as: UTF8.self) else {
                throw DERReader.malformed("UTF8String is not valid UTF-8", at: offset)
            }
            return s
        case .ia5String:
            guard let s = Self.asciiString(content) else { throw DERReader.malformed("IA5String has non-ASCII bytes", at: offset) }
            return s
        default:
            throw DERReader.malformed("expected UTF8String or IA5String, found \(tag)", at: offset)
        }
    }
}

/// Bounds that keep hostile input from costing more than a real receipt does.
public struct DERLimits: Sendable {
    public var maxDepth: Int
    public var maxInputBytes: Int
    public init(maxDepth: Int = 24, maxInputBytes: Int = 1 << 20) {
        self.maxDepth = maxDepth
        self.maxInputBytes = maxInputBytes
    }
}

/// A strict reader of BER/DER: the DER subset Apple signs, plus the BER indefinite lengths and
/// constructed octet strings that Xcode's StoreKit receipts use. Everything else a lenient BER
/// decoder would tolerate (non-minimal tags or lengths, lengths past the end, primitive elements
/// with indefinite length, stray end-of-contents) is refused as MALFORMED_RECEIPT with the offset.
public struct DERReader: Sendable {
    private let bytes: [UInt8]
    private let end: Int
    private let depth: Int
    private let limits: DERLimits
    public private(set) var position: Int

    public init(_ bytes: [UInt8], limits: DERLimits = DERLimits()) throws(VerificationError) {
        guard bytes.count <= limits.maxInputBytes else {
            throw VerificationError(.inputTooLarge, "DER input of \(bytes.count) bytes exceeds \(limits.maxInputBytes)")
        }
        try self.init(bytes: bytes, range: 0..<bytes.count, depth: 0, limits: limits)
    }

    init(bytes: [UInt8], range: Range<Int>, depth: Int, limits: DERLimits) throws(VerificationError) {
        guard depth <= limits.maxDepth else {
            throw Self.malformed("nesting deeper than \(limits.maxDepth)", at: range.lowerBound)
        }
        self.bytes = bytes
        self.position = range.lowerBound
        self.end = range.upperBound
        self.depth = depth
        self.limits = limits
    }

    static func malformed(_ message: String, at offset: Int) -> VerificationError {
        VerificationError(.malformedReceipt, "DER: \(message) at offset \(offset)")
    }

    public var isAtEnd: Bool { position >= end }

    /// The next element, or nil at the end of this reader's range.
    public mutating func next() throws(VerificationError) -> DERElement? {
        guard position < end else { return nil }
        let (element, after) = try Self.parseElement(bytes, at: position, end: end, depth: depth, limits: limits)
        position = after
        return element
    }

    /// The next element, which must exist and carry `tag`.
    public mutating func read(_ tag: DERTag, _ what: String) throws(VerificationError) -> DERElement {
        guard let element = try next() else { throw Self.malformed("missing \(what)", at: position) }
        guard element.tag == tag else { throw Self.malformed("expected \(what) \(tag), found \(element.tag)", at: element.offset) }
        return element
    }

    /// Reads the next element only if it carries `tag`.
    public mutating func readIfPresent(_ tag: DERTag) throws(VerificationError) -> DERElement? {
        guard position < end else { return nil }
        let saved = position
        guard let element = try next() else { return nil }
        if element.tag == tag { return element }
        position = saved
        return nil
    }

    /// The whole buffer and the end of this reader's range, for this module's fast paths (which
    /// read canonical DER in place and hand anything else back to `next()`).
    var buffer: [UInt8] { bytes }
    var endPosition: Int { end }

    /// Moves past elements a fast path has already read; `to` must lie within what is left.
    mutating func skip(to newPosition: Int) {
        precondition(newPosition >= position && newPosition <= end)
        position = newPosition
    }

    /// Refuses anything left over: trailing bytes are where parser differentials hide.
    public func finish(_ what: String) throws(VerificationError) {
        guard position >= end else { throw Self.malformed("unexpected data after \(what)", at: position) }
    }

    private static func parseElement(_ b: [UInt8], at start: Int, end: Int, depth: Int,
                                     limits: DERLimits) throws(VerificationError) -> (DERElement, Int) {
        var p = start
        func byte() throws(VerificationError) -> UInt8 {
            guard p < end else { throw malformed("truncated element", at: start) }
            defer { p += 1 }
            return b[p]
        }
        let first = try byte()
        let tagClass = DERTag.TagClass(rawValue: first >> 6)!
        let constructed = first & 0x20 != 0
        var number = UInt32(first & 0x1F)
        if number == 0x1F {
            number = 0
            var count = 0
            while true {
                let next = try byte()
                count += 1
                if count == 1 && next == 0x80 { throw malformed("tag number not minimally encoded", at: start) }
                guard count <= 4 else { throw malformed("tag number too large", at: start) }
                number = (number << 7) | UInt32(next & 0x7F)
                if next & 0x80 == 0 { break }
            }
            guard number >= 0x1F else { throw malformed("long-form tag for a small tag number", at: start) }
        }
        if first == 0 { throw malformed("unexpected end-of-contents", at: start) }
        let tag = DERTag(tagClass, number, constructed: constructed)

        let lengthByte = try byte()
        if lengthByte == 0x80 {
            guard constructed else { throw malformed("indefinite length on a primitive element", at: start) }
            guard depth + 1 <= limits.maxDepth else { throw malformed("nesting deeper than \(limits.maxDepth)", at: start) }
            // Walk the children to find the end-of-contents octets that close this element.
            let contentStart = p
            while true {
                guard p + 1 < end else { throw malformed("indefinite length without end-of-contents", at: start) }
                if b[p] == 0 && b[p + 1] == 0 { break }
                let (_, after) = try parseElement(b, at: p, end: end, depth: depth + 1, limits: limits)
                p = after
            }
            let element = DERElement(tag: tag, offset: start, contentRange: contentStart..<p, indefiniteLength: true,
                                     bytes: b, depth: depth, limits: limits)
            return (element, p + 2)
        }
        var length: Int
        if lengthByte & 0x80 == 0 {
            length = Int(lengthByte)
        } else {
            let count = Int(lengthByte & 0x7F)
            guard count <= 4 else { throw malformed("length of \(count) octets", at: start) }
            length = 0
            for i in 0..<count {
                let next = try byte()
                if i == 0 && next == 0 { throw malformed("length not minimally encoded", at: start) }
                length = (length << 8) | Int(next)
            }
            guard length >= 0x80 else { throw malformed("long-form length for a short length", at: start) }
        }
        guard length <= end - p else {
            throw malformed("length \(length) runs past the end of its container (\(end - p) bytes left)", at: start)
        }
        let element = DERElement(tag: tag, offset: start, contentRange: p..<(p + length), indefiniteLength: false,
                                 bytes: b, depth: depth, limits: limits)
        return (element, p + length)
    }
}
