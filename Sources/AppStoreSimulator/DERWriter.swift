/// The few DER encodings a receipt payload needs. Definite lengths only; SET members are written
/// in the order given (Apple's receipts are not sorted either, and our reader does not require it).
enum DER {
    static func tlv(_ tag: UInt8, _ body: [UInt8]) -> [UInt8] {
        [tag] + length(body.count) + body
    }

    static func length(_ n: Int) -> [UInt8] {
        if n < 0x80 { return [UInt8(n)] }
        var bytes: [UInt8] = []
        var v = n
        while v > 0 { bytes.insert(UInt8(v & 0xFF), at: 0); v >>= 8 }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    /// Two's complement, minimal length.
    static func integer(_ value: Int64) -> [UInt8] {
        var bytes = withUnsafeBytes(of: value.bigEndian, Array.init)
        while bytes.count > 1 && ((bytes[0] == 0 && bytes[1] & 0x80 == 0) || (bytes[0] == 0xFF && bytes[1] & 0x80 != 0)) {
            bytes.removeFirst()
        }
        return tlv(0x02, bytes)
    }

    static func octetString(_ bytes: [UInt8]) -> [UInt8] { tlv(0x04, bytes) }
    static func utf8String(_ s: String) -> [UInt8] { tlv(0x0C, Array(s.utf8)) }
    static func ia5String(_ s: String) -> [UInt8] { tlv(0x16, Array(s.utf8)) }
    static func sequence(_ members: [[UInt8]]) -> [UInt8] { tlv(0x30, members.flatMap { $0 }) }
    static func set(_ members: [[UInt8]]) -> [UInt8] { tlv(0x31, members.flatMap { $0 }) }
}
