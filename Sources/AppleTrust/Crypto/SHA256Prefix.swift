import COpenSSL

/// SHA-256 state after the whole 64-byte blocks of some bytes (a JWS header segment), so that the
/// digest of those bytes followed by anything can be finished without hashing the blocks again.
///
/// SHA-256 consumes its input in 64-byte blocks and its state after a block depends on nothing
/// but the bytes before it; continuing from this state over `bytes[coveredCount...]` + rest yields
/// exactly `SHA256(bytes + rest)`. Only whole blocks are kept (the partial tail is re-read per
/// call from the caller's own bytes), so the state holds nothing the caller does not pass again.
/// Whoever reuses one must know the bytes are the same: the chain cache does, by comparing every
/// byte of its key (see `VerifiedChain.headerHash`).
struct SHA256Prefix: Sendable {
    /// How many leading bytes the state has absorbed: a multiple of 64.
    let coveredCount: Int
    private let state: SHA256_CTX

    /// False when OpenSSL reported a failure: then no digest finished from this state is used.
    private let usable: Bool

    /// Hashes the whole 64-byte blocks of `bytes`.
    init(_ bytes: UnsafeRawBufferPointer) {
        var context = SHA256_CTX()
        var ok = iapgw_SHA256_Init(&context) == 1
        let covered = bytes.count / 64 * 64
        if covered > 0 { ok = ok && iapgw_SHA256_Update(&context, bytes.baseAddress, covered) == 1 }
        coveredCount = covered
        state = context
        usable = ok
    }

    /// SHA-256 of the prefix's bytes followed by whatever comes after them, given as `message`:
    /// the whole message again (its first `coveredCount` bytes must be the ones this state hashed;
    /// they are skipped, not re-read). Writes 32 bytes to `digest`; false (nothing to verify
    /// against: the caller refuses the signature) if the message is shorter than the hashed prefix
    /// or OpenSSL reported a failure. Neither happens for a split JWS; failing closed, not trapping.
    func finish(_ message: UnsafeRawBufferPointer, into digest: UnsafeMutablePointer<UInt8>) -> Bool {
        guard usable, message.count >= coveredCount else { return false }
        var context = state  // a copy: this state serves every later call too
        let rest = message.count - coveredCount
        if rest > 0, iapgw_SHA256_Update(&context, message.baseAddress! + coveredCount, rest) != 1 { return false }
        return iapgw_SHA256_Final(digest, &context) == 1
    }
}
