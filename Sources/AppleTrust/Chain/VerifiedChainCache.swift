import Foundation
import Synchronization

/// What a verified chain leaves behind: enough to check the next signature under the same header
/// without parsing three certificates and rebuilding the chain (≈ 10× the cost of one ECDSA verify).
struct VerifiedChain: @unchecked Sendable {
    let leafKey: ECPublicKey
    /// Validity of leaf, intermediate and root together; a hit outside it is not honoured.
    let validity: ChainValidity
    /// When OCSP last said "good" for this chain (seconds), if online checks ran.
    var revocationCheckedAt: Int64?
    /// SHA-256 state after the whole 64-byte blocks of the header segment this entry is stored
    /// under (4,352 of the 4,992 bytes Apple's real transaction signs), so a hit hashes only the rest. A hit
    /// is only ever for a header equal to the stored key in every byte (`ExactBytes`), so the
    /// state is that of the very bytes being verified: the digest, and so what the signature
    /// check accepts, is the one-shot SHA-256 of the signing input, as on a miss.
    let headerHash: SHA256Prefix
    /// Signatures that verified under `leafKey` (see `VerifiedSignatureMemo`: why a hit is the
    /// verify's own verdict). A reference: every copy of this entry shares it, and it ends with the entry.
    let verifiedSignatures: VerifiedSignatureMemo
}

/// Exact bytes as a dictionary key. Stored keys own their bytes; a lookup key borrows the caller's
/// buffer for the duration of the lookup, so a hit copies nothing.
///
/// Equality is always all bytes. The hash covers the length and only the first `hashedPrefix`
/// bytes: x5c headers differ early (the leaf certificate comes first, and its serial number near
/// its start), and hashing all ~4 KiB cost more than the rest of the lookup. Headers that share a
/// prefix only share a bucket; the cache is bounded, so that costs at most a few comparisons.
struct ExactBytes: Hashable, @unchecked Sendable {
    static let hashedPrefix = 256

    private let owned: [UInt8]?
    private let borrowed: UnsafeBufferPointer<UInt8>?

    /// A key that owns a copy of `bytes` (for storing).
    init(copying bytes: UnsafeBufferPointer<UInt8>) { owned = Array(bytes); borrowed = nil }
    /// A key valid only while `bytes` is (for lookups under the lock).
    init(borrowing bytes: UnsafeBufferPointer<UInt8>) { owned = nil; borrowed = bytes }

    private func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let owned { return owned.withUnsafeBufferPointer(body) }
        return body(borrowed!)
    }

    func hash(into hasher: inout Hasher) {
        withBytes { b in
            hasher.combine(b.count)
            hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: b[0..<min(b.count, Self.hashedPrefix)])))
        }
    }

    static func == (a: ExactBytes, b: ExactBytes) -> Bool {
        a.withBytes { x in
            b.withBytes { y in
                x.count == y.count && (x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0)
            }
        }
    }
}

/// A bounded map from exact bytes that carry a certificate chain to what its verification left
/// behind: a JWS header segment (x5c) to its `VerifiedChain`, a receipt's certificates and signer
/// to its verified signer. Keys are whole bytes, so equality is byte equality, not a hash. Only
/// successes are stored. Eviction is first-in-first-out: cheap, and Apple signs with few distinct
/// chains at a time.
package final class VerifiedChainCache<Value: Sendable>: Sendable {
    private struct State {
        var entries: [ExactBytes: Value] = [:]
        var order: [ExactBytes] = []
        var head = 0
    }

    package let capacity: Int
    private let state = Mutex(State())
    private let hitCount = Atomic<Int>(0)
    private let missCount = Atomic<Int>(0)

    package init(capacity: Int) { self.capacity = max(0, capacity) }

    package var hits: Int { hitCount.load(ordering: .relaxed) }
    package var misses: Int { missCount.load(ordering: .relaxed) }

    package func lookup(_ key: UnsafeBufferPointer<UInt8>) -> Value? {
        guard capacity > 0 else { missCount.add(1, ordering: .relaxed); return nil }
        let k = ExactBytes(borrowing: key)
        let found = state.withLock { $0.entries[k] }
        if found == nil { missCount.add(1, ordering: .relaxed) } else { hitCount.add(1, ordering: .relaxed) }
        return found
    }

    package func store(_ key: UnsafeBufferPointer<UInt8>, _ chain: Value) {
        guard capacity > 0 else { return }
        let k = ExactBytes(copying: key)
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

    package func removeAll() {
        state.withLock { $0 = State() }
    }
}
