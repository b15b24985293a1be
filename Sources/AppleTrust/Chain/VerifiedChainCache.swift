import Synchronization

/// What a verified chain leaves behind: enough to check the next signature under the same header
/// without parsing three certificates and rebuilding the chain (≈ 10× the cost of one ECDSA verify).
struct VerifiedChain: @unchecked Sendable {
    let leafKey: ECPublicKey
    /// Validity of leaf, intermediate and root together; a hit outside it is not honoured.
    let validity: ChainValidity
    /// When OCSP last said "good" for this chain (seconds), if online checks ran.
    var revocationCheckedAt: Int64?
}

/// Exact bytes as a dictionary key, hashed in one pass (the default `[UInt8]` hash feeds the
/// hasher byte by byte, which showed up in profiles for 4 KiB headers).
struct ExactBytes: Hashable, Sendable {
    let bytes: [UInt8]
    func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }
    static func == (a: ExactBytes, b: ExactBytes) -> Bool { a.bytes == b.bytes }
}

/// A bounded map from the exact bytes of a JWS header segment (which carries x5c) to its verified
/// chain. Keys are whole bytes, so equality is byte equality, not a hash. Only successes are stored.
/// Eviction is first-in-first-out: cheap, and Apple signs with few distinct chains at a time.
final class VerifiedChainCache: Sendable {
    private struct State {
        var entries: [ExactBytes: VerifiedChain] = [:]
        var order: [ExactBytes] = []
        var head = 0
    }

    let capacity: Int
    private let state = Mutex(State())
    private let hitCount = Atomic<Int>(0)
    private let missCount = Atomic<Int>(0)

    init(capacity: Int) { self.capacity = max(0, capacity) }

    var hits: Int { hitCount.load(ordering: .relaxed) }
    var misses: Int { missCount.load(ordering: .relaxed) }

    func lookup(_ key: UnsafeBufferPointer<UInt8>) -> VerifiedChain? {
        guard capacity > 0 else { missCount.add(1, ordering: .relaxed); return nil }
        let k = ExactBytes(bytes: Array(key))
        let found = state.withLock { $0.entries[k] }
        if found == nil { missCount.add(1, ordering: .relaxed) } else { hitCount.add(1, ordering: .relaxed) }
        return found
    }

    func store(_ key: UnsafeBufferPointer<UInt8>, _ chain: VerifiedChain) {
        guard capacity > 0 else { return }
        let k = ExactBytes(bytes: Array(key))
        state.withLock { s in
            if s.entries.updateValue(chain, forKey: k) != nil { return }
            if s.order.count < capacity {
                s.order.append(k)
            } else {
                s.entries.removeValue(forKey: s.order[s.head])
                s.order[s.head] = k
                s.head = (s.head + 1) % capacity
            }
        }
    }

    func removeAll() {
        state.withLock { $0 = State() }
    }
}
