import COpenSSL
import Foundation
import IAPCore
import Synchronization

/// An EC public key (the leaf's P-256 key in a JWS chain). Owns its `EVP_PKEY`.
public final class ECPublicKey: @unchecked Sendable {
    let pkey: OpaquePointer

    /// Whether this is a key on the named curve NIST P-256 (prime256v1), the only curve ES256
    /// allows. Fixed for the key's life, so asked of OpenSSL once rather than on every verification.
    public let isNamedP256: Bool

    /// Verify contexts initialised for this key and idle. Creating one per call showed up in
    /// profiles of the warm JWS path; a context serves one verification at a time (taken out
    /// under the lock, put back after a success, freed after a failure).
    private let idleVerifyContexts = Mutex<[VerifyContext]>([])
    private static let maxIdleVerifyContexts = 8

    /// An `EVP_PKEY_CTX` owned by exactly one holder at a time (the pool or one verify call).
    private struct VerifyContext: @unchecked Sendable { let pointer: OpaquePointer }

    /// Takes ownership of one reference to `pkey`.
    init(owning pkey: OpaquePointer) {
        self.pkey = pkey
        self.isNamedP256 = Self.isNamedP256(pkey)
    }

    /// Whether `pkey` is an EC key on P-256 given by name, as Apple's libraries require of every
    /// ES256 key (CryptoKit's `P256`). Being EC of 256 bits is not enough: secp256k1 and
    /// brainpoolP256r1 are too.
    static func isNamedP256(_ pkey: OpaquePointer) -> Bool { namedCurve(pkey) == "prime256v1" }

    /// OpenSSL's name of the curve (prime256v1, secp384r1, ...) when `pkey` is an EC key whose
    /// curve is given by name; nil for any other key. A key with explicit curve parameters is nil
    /// even when they are a named curve's (OpenSSL then still names the group): RFC 5480 allows
    /// only named curves, and explicit parameters are how curve substitution (CVE-2020-0601) gets in.
    static func namedCurve(_ pkey: OpaquePointer) -> String? {
        defer { clearOpenSSLErrors() }
        guard EVP_PKEY_is_a(pkey, "EC") == 1 else { return nil }
        func parameter(_ name: String) -> String? {
            var buffer = [CChar](repeating: 0, count: 64)
            var length = 0
            guard EVP_PKEY_get_utf8_string_param(pkey, name, &buffer, buffer.count, &length) == 1 else { return nil }
            return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        guard parameter(OSSL_PKEY_PARAM_EC_ENCODING) == OSSL_PKEY_EC_ENCODING_GROUP else { return nil }
        return parameter(OSSL_PKEY_PARAM_GROUP_NAME)
    }

    /// This key's curve name, as `namedCurve(_:)`.
    public var namedCurve: String? { Self.namedCurve(pkey) }

    deinit {
        idleVerifyContexts.withLock { contexts in
            for context in contexts { EVP_PKEY_CTX_free(context.pointer) }
            contexts.removeAll()
        }
        EVP_PKEY_free(pkey)
    }

    private func takeVerifyContext() -> VerifyContext? {
        if let idle = idleVerifyContexts.withLock({ $0.popLast() }) { return idle }
        guard let ctx = EVP_PKEY_CTX_new(pkey, nil) else { return nil }
        guard EVP_PKEY_verify_init(ctx) == 1 else { EVP_PKEY_CTX_free(ctx); return nil }
        return VerifyContext(pointer: ctx)
    }

    private func giveBack(_ context: VerifyContext) {
        let kept = idleVerifyContexts.withLock { contexts -> Bool in
            guard contexts.count < Self.maxIdleVerifyContexts else { return false }
            contexts.append(context)
            return true
        }
        if !kept { EVP_PKEY_CTX_free(context.pointer) }
    }

    /// Same key material (used to recognise a pinned root presented with another encoding).
    public func sameKey(as other: ECPublicKey) -> Bool { EVP_PKEY_eq(pkey, other.pkey) == 1 }

    /// ES256 verification: `signature` is JWS's raw r||s (64 bytes), converted here to the DER
    /// `ECDSA-Sig-Value` OpenSSL expects, checked over SHA-256 of `message`.
    public func verifyES256<Message: ContiguousBytes>(signature: [UInt8], message: Message) -> Bool {
        // The digest lives on the stack: this runs once per JWS on the hot path.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { digest in
            message.withUnsafeBytes { raw in
                _ = SHA256(raw.bindMemory(to: UInt8.self).baseAddress, raw.count, digest.baseAddress)
            }
            return verifyES256(signature: signature, sha256: UnsafeBufferPointer(digest))
        }
    }

    /// The same check given the message's SHA-256 (32 bytes) instead of the message: for callers
    /// that finish the digest from a saved state (`SHA256Prefix`).
    func verifyES256(signature: [UInt8], sha256 digest: UnsafeBufferPointer<UInt8>) -> Bool {
        guard signature.count == 64, digest.count == 32, isNamedP256 else { return false }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: ES256Signature.maxDERCount) { derSpace in
            let derCount = signature.withUnsafeBufferPointer { ES256Signature.writeDER(raw: $0, into: derSpace) }
            defer { clearOpenSSLErrors() }
            guard let context = takeVerifyContext() else { return false }
            let verified = EVP_PKEY_verify(context.pointer, derSpace.baseAddress, derCount, digest.baseAddress, 32) == 1
            // Only a context whose last use succeeded goes back: a failure leaves nothing to reason about.
            if verified { giveBack(context) } else { EVP_PKEY_CTX_free(context.pointer) }
            return verified
        }
    }
}

/// Conversions between JWS's fixed-size r||s and DER's `SEQUENCE { INTEGER r, INTEGER s }`.
enum ES256Signature {
    /// SEQUENCE header (2) + two INTEGERs of at most 33 content octets each (2 + 33).
    static let maxDERCount = 2 + 2 * 35

    /// Writes the DER of a 64-byte r||s into `out` (at least `maxDERCount` bytes); returns its
    /// length. Hand-encoded without allocating: the structure is tiny and fixed, and this runs on
    /// every verification.
    static func writeDER(raw: UnsafeBufferPointer<UInt8>, into out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        var p = 2
        for half in 0..<2 {
            let base = half * 32
            var first = base
            while first < base + 32 && raw[first] == 0 { first += 1 }
            let value = UnsafeBufferPointer(rebasing: raw[first..<(base + 32)])
            let needsZero = value.isEmpty || value[0] & 0x80 != 0
            out[p] = 0x02
            out[p + 1] = UInt8(value.count + (needsZero ? 1 : 0))
            p += 2
            if needsZero { out[p] = 0; p += 1 }
            for byte in value { out[p] = byte; p += 1 }
        }
        out[0] = 0x30
        out[1] = UInt8(p - 2)
        return p
    }

    static func rawFromDER(_ der: [UInt8]) -> [UInt8]? {
        var p: UnsafePointer<UInt8>? = nil
        return der.withUnsafeBufferPointer { buf -> [UInt8]? in
            p = buf.baseAddress
            guard let sig = d2i_ECDSA_SIG(nil, &p, buf.count) else { return nil }
            defer { ECDSA_SIG_free(sig) }
            var out = [UInt8](repeating: 0, count: 64)
            let ok = out.withUnsafeMutableBufferPointer { o -> Bool in
                BN_bn2binpad(ECDSA_SIG_get0_r(sig), o.baseAddress, 32) == 32
                    && BN_bn2binpad(ECDSA_SIG_get0_s(sig), o.baseAddress! + 32, 32) == 32
            }
            return ok ? out : nil
        }
    }
}
