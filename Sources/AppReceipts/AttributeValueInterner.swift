import Foundation

/// Shares one stored copy (and one decoded value) between equal attribute values of a receipt.
///
/// Arrays and Strings are values, so sharing storage changes nothing observable; it saves an
/// allocation, a decode and a deallocation for every repeat. Bounded so hostile input cannot make
/// it costly: only short values are shared, the table holds at most `maxEntries`, and a lookup
/// gives up after `maxProbes` slots (the value is then simply copied, as without the interner).
struct AttributeValueInterner {
    static let maxValueBytes = 64
    static let slotCount = 2048
    static let maxEntries = 1024
    static let maxProbes = 8

    /// Entry index + 1 per slot; 0 is empty. Allocated on first use.
    private var slots: [Int32] = []
    private var entries: [(raw: [UInt8], value: ReceiptAttributeValue)] = []

    /// A stored copy of `raw` and its decoded value, shared with any equal value seen before.
    mutating func intern(_ raw: UnsafeBufferPointer<UInt8>) -> ([UInt8], ReceiptAttributeValue) {
        guard raw.count <= Self.maxValueBytes else { return Self.make(raw) }
        if slots.isEmpty { slots = [Int32](repeating: 0, count: Self.slotCount) }
        var slot = Int(truncatingIfNeeded: Self.hash(raw)) & (Self.slotCount - 1)
        for _ in 0..<Self.maxProbes {
            let entry = Int(slots[slot])
            if entry == 0 {
                let made = Self.make(raw)
                if entries.count < Self.maxEntries {
                    entries.append(made)
                    slots[slot] = Int32(entries.count)
                }
                return made
            }
            let candidate = entries[entry - 1]
            if Self.equal(candidate.raw, raw) { return candidate }
            slot = (slot + 1) & (Self.slotCount - 1)
        }
        return Self.make(raw)
    }

    private static func make(_ raw: UnsafeBufferPointer<UInt8>) -> ([UInt8], ReceiptAttributeValue) {
        let array = Array(raw)
        return (array, CanonicalAttribute.simpleValue(raw) ?? ReceiptAttributeValue.decode(array))
    }

    private static func equal(_ stored: [UInt8], _ raw: UnsafeBufferPointer<UInt8>) -> Bool {
        guard stored.count == raw.count else { return false }
        if raw.isEmpty { return true }
        return stored.withUnsafeBufferPointer { memcmp($0.baseAddress!, raw.baseAddress!, raw.count) == 0 }
    }

    /// A multiply-xorshift over 8-byte words (short inputs; collisions only cost probes, which are
    /// bounded above, never correctness).
    private static func hash(_ raw: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var h = UInt64(raw.count) &* 0x9E37_79B9_7F4A_7C15
        let base = UnsafeRawPointer(raw.baseAddress)
        var i = 0
        while i &+ 8 <= raw.count {
            h = (h ^ base!.loadUnaligned(fromByteOffset: i, as: UInt64.self)) &* 0xBF58_476D_1CE4_E5B9
            h ^= h >> 31
            i &+= 8
        }
        var tail: UInt64 = 0
        while i < raw.count { tail = tail << 8 | UInt64(raw[i]); i &+= 1 }
        h = (h ^ tail) &* 0x94D0_49BB_1331_11EB
        return h ^ (h >> 29)
    }
}
