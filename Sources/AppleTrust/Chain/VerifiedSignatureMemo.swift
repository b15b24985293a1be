import Synchronization

/// ES256 signatures that verified under one chain entry's leaf key, as (SHA-256 digest of the
/// signing input, signature) pairs, so the same signature presented again (a re-claim: the app
/// sends the same signed transaction on every launch) is not verified again.
///
/// Why a hit gives exactly the verdict a verify would: ECDSA verification is a deterministic
/// function of (public key, digest, signature) and reads nothing else. The key is fixed (the memo
/// lives inside one `VerifiedChain`, whose leaf key it serves, and dies with it); the digest is
/// computed on every call from the call's own signing input; the signature is compared in all 64
/// bytes. So a hit is the very triple `EVP_PKEY_verify` already accepted, and a triple differing
/// in any byte (another payload, a high-S twin (r, n − s), another header: another digest or key)
/// is a miss and verified for real. It assumes nothing ES256 does not: ES256 signs the digest, so
/// two signing inputs with one digest (a SHA-256 collision) already share every signature.
/// Only pairs that verified are stored; a failure is never remembered, so it costs a verify each time.
/// Nothing after the signature is memoised: the payload is parsed from the call's bytes and
/// every date, claim and online check runs on every call.
///
/// Bounded: `capacity` pairs per chain entry (default `SignedDataVerifier.defaultSignatureMemoCapacity`,
/// 128), first-in-first-out. A pair is 96 bytes, kept in a set and a ring: ≈ 36 KB per full entry,
/// so ≈ 2.3 MB if all 64 entries of a default chain cache were full (64 different Apple leaf
/// chains, each with 128 distinct verified signatures); usually one or two leaves, ≈ 36–72 KB.
final class VerifiedSignatureMemo: Sendable {
    /// The digest and the signature by value: equality is all 96 bytes.
    struct Pair: Hashable, Sendable {
        let digest: SIMD4<UInt64>
        let signature: SIMD8<UInt64>

        /// nil unless the digest is 32 bytes and the signature ES256's 64 (anything else never verifies).
        init?(digest: UnsafeBufferPointer<UInt8>, signature: [UInt8]) {
            guard digest.count == 32, signature.count == 64 else { return nil }
            self.digest = UnsafeRawPointer(digest.baseAddress!).loadUnaligned(as: SIMD4<UInt64>.self)
            self.signature = signature.withUnsafeBytes { $0.loadUnaligned(as: SIMD8<UInt64>.self) }
        }

        // The bucket from 16 digest bytes: SHA-256 output is uniform, and only verified pairs are
        // ever stored, so no one chooses colliding buckets; equality still compares everything.
        func hash(into hasher: inout Hasher) {
            hasher.combine(digest[0])
            hasher.combine(digest[1])
        }
    }

    private struct State {
        var pairs: Set<Pair> = []
        var order: [Pair] = []
        var next = 0
    }

    let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) { self.capacity = max(0, capacity) }

    func contains(_ pair: Pair) -> Bool {
        guard capacity > 0 else { return false }
        return state.withLock { $0.pairs.contains(pair) }
    }

    /// Call only after `EVP_PKEY_verify` accepted this pair under the entry's leaf key.
    func insertVerified(_ pair: Pair) {
        guard capacity > 0 else { return }
        state.withLock { s in
            guard s.pairs.insert(pair).inserted else { return }
            if s.order.count < capacity {
                s.order.append(pair)
            } else {
                s.pairs.remove(s.order[s.next])
                s.order[s.next] = pair
                s.next = (s.next + 1) % capacity
            }
        }
    }

    var count: Int { state.withLock { $0.pairs.count } }
}
