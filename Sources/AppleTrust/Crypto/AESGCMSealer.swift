import COpenSSL
import Foundation
import IAPCore

/// AES-256-GCM through OpenSSL, for data the gateway keeps at rest but must not store readable
/// (the newest legacy receipt, kept for re-verification). Output: 12-byte random nonce ‖ ciphertext
/// ‖ 16-byte tag; `associatedData` binds a sealed value to its row (e.g. bundle and transaction).
public struct AESGCMSealer: Sendable {
    private let key: [UInt8]
    static let maxLength = Int(Int32.max) - 64

    public init(key: [UInt8]) throws(VerificationError) {
        guard key.count == 32 else { throw VerificationError(.invalidConfiguration, "the sealing key must be 32 bytes") }
        self.key = key
    }

    public func seal(_ plaintext: [UInt8], associatedData: [UInt8]) throws(VerificationError) -> [UInt8] {
        // OpenSSL takes Int32 lengths: a larger value would trap in the conversion.
        guard plaintext.count <= Self.maxLength, associatedData.count <= Self.maxLength else {
            throw VerificationError(.inputTooLarge, "value too large to seal")
        }
        var nonce = [UInt8](repeating: 0, count: 12)
        guard RAND_bytes(&nonce, 12) == 1 else { throw VerificationError(.storageUnavailable, "no randomness for sealing") }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw VerificationError(.storageUnavailable, "cipher context") }
        defer { EVP_CIPHER_CTX_free(ctx); ERR_clear_error() }
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var length: Int32 = 0
        var total = 0
        guard EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nil, key, nonce) == 1,
              EVP_EncryptUpdate(ctx, nil, &length, associatedData, Int32(associatedData.count)) == 1,
              EVP_EncryptUpdate(ctx, &out, &length, plaintext, Int32(plaintext.count)) == 1 else {
            throw VerificationError(.storageUnavailable, "sealing failed")
        }
        total = Int(length)
        let finalOK = out.withUnsafeMutableBufferPointer { buf in
            EVP_EncryptFinal_ex(ctx, buf.baseAddress! + total, &length) == 1
        }
        guard finalOK else { throw VerificationError(.storageUnavailable, "sealing failed") }
        total += Int(length)
        var tag = [UInt8](repeating: 0, count: 16)
        guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, &tag) == 1 else {
            throw VerificationError(.storageUnavailable, "sealing failed")
        }
        return nonce + out.prefix(total) + tag
    }

    public func open(_ sealed: [UInt8], associatedData: [UInt8]) throws(VerificationError) -> [UInt8] {
        guard sealed.count >= 28 else { throw VerificationError(.storageUnavailable, "sealed value too short") }
        guard sealed.count <= Self.maxLength, associatedData.count <= Self.maxLength else {
            throw VerificationError(.inputTooLarge, "sealed value too large")
        }
        let nonce = Array(sealed.prefix(12))
        var tag = Array(sealed.suffix(16))
        let body = Array(sealed.dropFirst(12).dropLast(16))
        guard let ctx = EVP_CIPHER_CTX_new() else { throw VerificationError(.storageUnavailable, "cipher context") }
        defer { EVP_CIPHER_CTX_free(ctx); ERR_clear_error() }
        var out = [UInt8](repeating: 0, count: body.count + 16)
        var length: Int32 = 0
        guard EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nil, key, nonce) == 1,
              EVP_DecryptUpdate(ctx, nil, &length, associatedData, Int32(associatedData.count)) == 1,
              EVP_DecryptUpdate(ctx, &out, &length, body, Int32(body.count)) == 1,
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, &tag) == 1 else {
            throw VerificationError(.storageUnavailable, "opening a sealed value failed")
        }
        let total = Int(length)
        let finalOK = out.withUnsafeMutableBufferPointer { buf in EVP_DecryptFinal_ex(ctx, buf.baseAddress! + total, &length) == 1 }
        guard finalOK else { throw VerificationError(.storageUnavailable, "a sealed value failed authentication") }
        return Array(out.prefix(total + Int(length)))
    }
}
