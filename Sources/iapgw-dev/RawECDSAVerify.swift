import COpenSSL
import CommandLineSupport

/// One ECDSA verify the way `openssl speed ecdsapNNN` times it: a fresh key on the curve, one
/// `EVP_PKEY_CTX` initialised once, `EVP_PKEY_verify` of a signature over 20 random bytes (speed's
/// "digest"; with all-zero bytes u1 = 0 and a P-384 verify would skip the generator term, ~13% less).
/// The cold JWS row measures its floor with these, in chunks alternated with the cold calls
/// (`BenchCommand.measureAlternating`), so load that drifts on the shared machine falls on both.
final class RawECDSAVerify {
    private let key: OpaquePointer
    private let context: OpaquePointer
    private let digest: [UInt8]
    private let signature: [UInt8]

    /// `curve`: an OpenSSL group name ("P-256", "P-384").
    init(curve: String) throws(UsageError) {
        var digest = [UInt8](repeating: 0, count: 20)
        guard RAND_bytes(&digest, Int32(digest.count)) == 1, let key = iapgw_EVP_EC_gen(curve) else {
            throw UsageError(message: "cannot make a \(curve) key for the floor")
        }
        var signature = [UInt8](repeating: 0, count: 160)
        var length = signature.count
        let signer = EVP_PKEY_CTX_new(key, nil)
        let signed = signer != nil && EVP_PKEY_sign_init(signer) == 1
            && EVP_PKEY_sign(signer, &signature, &length, digest, digest.count) == 1
        EVP_PKEY_CTX_free(signer)
        guard signed, let context = EVP_PKEY_CTX_new(key, nil), EVP_PKEY_verify_init(context) == 1 else {
            EVP_PKEY_free(key)
            throw UsageError(message: "cannot sign and verify with a \(curve) key for the floor")
        }
        self.key = key
        self.context = context
        self.digest = digest
        self.signature = Array(signature[0..<length])
    }

    deinit {
        EVP_PKEY_CTX_free(context)
        EVP_PKEY_free(key)
    }

    /// Whether the signature verifies (it always should: a false answer voids the measurement).
    func verify() -> Bool { EVP_PKEY_verify(context, signature, signature.count, digest, digest.count) == 1 }
}
