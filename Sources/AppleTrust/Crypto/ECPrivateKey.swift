import COpenSSL
import Foundation
import IAPCore

/// An EC private key: the `.p8` key that signs App Store Server API tokens, or a test PKI key.
/// Owns its `EVP_PKEY`. Never printed: `description` names the curve only.
public final class ECPrivateKey: @unchecked Sendable, CustomStringConvertible {
    public enum Curve: String, Sendable { case p256 = "P-256", p384 = "P-384" }

    let pkey: OpaquePointer

    /// Takes ownership of `pkey`. Public to the test PKI only, which makes keys on other curves
    /// (secp256k1, explicit parameters) to prove they are refused.
    @_spi(TestPKI) public init(owning pkey: OpaquePointer) { self.pkey = pkey }
    deinit { EVP_PKEY_free(pkey) }

    /// The OpenSSL handle, for the test PKI that signs certificates with it. Borrowed, not owned.
    @_spi(TestPKI) public var evpPKey: OpaquePointer { pkey }

    public var description: String { "ECPrivateKey(\(EVP_PKEY_get_bits(pkey)) bits)" }

    /// A fresh key (tests, the simulator's PKI).
    public static func generate(_ curve: Curve = .p256) throws(VerificationError) -> ECPrivateKey {
        guard let k = iapgw_EVP_EC_gen(curve.rawValue) else {
            clearOpenSSLErrors()
            throw VerificationError(.invalidConfiguration, "EC key generation failed")
        }
        return ECPrivateKey(owning: k)
    }

    /// A PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`, Apple's `.p8`) holding an EC P-256 key.
    public convenience init(pkcs8PEM pem: String) throws(VerificationError) {
        let bytes = Array(pem.utf8)
        var passwordAsked = false
        let key: OpaquePointer? = bytes.withUnsafeBufferPointer { buf in
            guard buf.count <= Int(Int32.max), let bio = BIO_new_mem_buf(buf.baseAddress, Int32(buf.count)) else { return nil }
            defer { BIO_free(bio) }
            // Without a callback OpenSSL prompts on the terminal for an encrypted key, hanging a
            // service at startup: this one refuses (-1) and records that a password was wanted.
            return withUnsafeMutablePointer(to: &passwordAsked) { asked in
                PEM_read_bio_PrivateKey(bio, nil, { _, _, _, flag in
                    flag?.storeBytes(of: true, as: Bool.self)
                    return -1
                }, asked)
            }
        }
        clearOpenSSLErrors()
        if passwordAsked {
            if let key { EVP_PKEY_free(key) }
            throw VerificationError(.invalidConfiguration, "the key is encrypted; give the unencrypted .p8 Apple issues")
        }
        guard let key else { throw VerificationError(.invalidConfiguration, "the key is not a PKCS#8 PEM private key") }
        // P-256 by name, as Apple's libraries load a .p8 (`P256.Signing.PrivateKey`).
        guard ECPublicKey.isNamedP256(key) else {
            EVP_PKEY_free(key)
            throw VerificationError(.invalidConfiguration, "the key is not an EC key on the named curve P-256")
        }
        self.init(owning: key)
    }

    /// PKCS#8 PEM export (tests write a `.p8` with it).
    public var pkcs8PEM: String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PrivateKey(bio, pkey, nil, nil, 0, nil, nil) == 1 else { return "" }
        var ptr: UnsafeMutablePointer<CChar>? = nil
        let n = iapgw_BIO_get_mem_data(bio, &ptr)
        guard let ptr, n > 0 else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: ptr, count: Int(n)), as: UTF8.self)
    }

    /// The public half. Only an allocation failure inside OpenSSL can make it throw.
    public func derivePublicKey() throws(VerificationError) -> ECPublicKey {
        // Round-trip the public half through DER so the result holds no private material.
        var der: UnsafeMutablePointer<UInt8>? = nil
        let n = i2d_PUBKEY(pkey, &der)
        defer { CRYPTO_free(der, nil, 0); clearOpenSSLErrors() }
        guard n > 0, der != nil else { throw VerificationError(.invalidConfiguration, "cannot encode the public key") }
        var p = UnsafePointer(der)
        guard let pub = d2i_PUBKEY(nil, &p, Int(n)) else {
            throw VerificationError(.invalidConfiguration, "cannot decode the public key")
        }
        return ECPublicKey(owning: pub)
    }

    /// The public half, for callers that cannot handle the (allocation-failure-only) error of
    /// `derivePublicKey()`; prefer that in new code.
    public var publicKey: ECPublicKey {
        guard let key = try? derivePublicKey() else { fatalError("OpenSSL could not allocate a public key") }
        return key
    }

    /// ES256 signature as JWS wants it: raw r||s, 64 bytes.
    public func signES256<Message: ContiguousBytes>(_ message: Message) throws(VerificationError) -> [UInt8] {
        guard let raw = ES256Signature.rawFromDER(try signECDSASHA256DER(message)) else {
            throw VerificationError(.invalidConfiguration, "signing failed")
        }
        return raw
    }

    /// ECDSA with SHA-256 as DER `SEQUENCE { r, s }`: what StoreKit 1's promotional offer signature
    /// carries (base64), and what `openssl dgst -sha256 -verify` reads.
    public func signECDSASHA256DER<Message: ContiguousBytes>(_ message: Message) throws(VerificationError) -> [UInt8] {
        guard EVP_PKEY_get_bits(pkey) == 256 else {
            throw VerificationError(.invalidConfiguration, "ES256 needs a P-256 key")
        }
        let digest = SHA256Digest.hash(message)
        guard let ctx = EVP_PKEY_CTX_new(pkey, nil) else { throw VerificationError(.invalidConfiguration, "signing failed") }
        defer { EVP_PKEY_CTX_free(ctx); clearOpenSSLErrors() }
        var der = [UInt8](repeating: 0, count: 80)
        var len = der.count
        let ok = EVP_PKEY_sign_init(ctx) == 1 && der.withUnsafeMutableBufferPointer { d in
            digest.withUnsafeBufferPointer { h in EVP_PKEY_sign(ctx, d.baseAddress, &len, h.baseAddress, h.count) == 1 }
        }
        guard ok else { throw VerificationError(.invalidConfiguration, "signing failed") }
        return Array(der[0..<len])
    }
}
