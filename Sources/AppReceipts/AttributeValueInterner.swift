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

    /// FNV-1a: short inputs, and collisions only cost probes (bounded above), never correctness.
    private static func hash(_ raw: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in raw { h = (h ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return h ^ (h >> 29)
    }
}
