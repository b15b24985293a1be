import COpenSSL
import Foundation
import IAPCore

/// An EC public key (the leaf's P-256 key in a JWS chain). Owns its `EVP_PKEY`.
public final class ECPublicKey: @unchecked Sendable {
    let pkey: OpaquePointer

    /// Takes ownership of one reference to `pkey`.
    init(owning pkey: OpaquePointer) { self.pkey = pkey }
    deinit { EVP_PKEY_free(pkey) }

    /// Whether this is a key on NIST P-256, the only curve ES256 allows.
    public var isP256: Bool {
        EVP_PKEY_is_a(pkey, "EC") == 1 && EVP_PKEY_get_bits(pkey) == 256
    }

    /// Same key material (used to recognise a pinned root presented with another encoding).
    public func sameKey(as other: ECPublicKey) -> Bool { EVP_PKEY_eq(pkey, other.pkey) == 1 }

    /// ES256 verification: `signature` is JWS's raw r||s (64 bytes), converted here to the DER
    /// `ECDSA-Sig-Value` OpenSSL expects, checked over SHA-256 of `message`.
    public func verifyES256<Message: ContiguousBytes>(signature: [UInt8], message: Message) -> Bool {
        guard signature.count == 64, isP256 else { return false }
        let der = ES256Signature.derFromRaw(signature)
        let digest = SHA256Digest.hash(message)
        guard let ctx = EVP_PKEY_CTX_new(pkey, nil) else { return false }
        defer { EVP_PKEY_CTX_free(ctx); clearOpenSSLErrors() }
        guard EVP_PKEY_verify_init(ctx) == 1 else { return false }
        return der.withUnsafeBufferPointer { d in
            digest.withUnsafeBufferPointer { h in
                EVP_PKEY_verify(ctx, d.baseAddress, d.count, h.baseAddress, h.count) == 1
            }
        }
    }
}

/// Conversions between JWS's fixed-size r||s and DER's `SEQUENCE { INTEGER r, INTEGER s }`.
enum ES256Signature {
    /// Hand-encoded: the structure is tiny and fixed, and this runs on every verification.
    static func derFromRaw(_ raw: [UInt8]) -> [UInt8] {
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var b = bytes.drop(while: { $0 == 0 })
            if b.isEmpty { b = [0] }
            var body = Array(b)
            if body[0] & 0x80 != 0 { body.insert(0, at: 0) }
            return [0x02, UInt8(body.count)] + body
        }
        let r = integer(raw[0..<32]), s = integer(raw[32..<64])
        return [0x30, UInt8(r.count + s.count)] + r + s
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
