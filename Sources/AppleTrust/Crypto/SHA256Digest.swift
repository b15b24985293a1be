import COpenSSL
import Foundation
import IAPCore

/// SHA-256 through OpenSSL (one-shot; the inputs here are small): the one SHA-256 helper, for
/// fingerprints, signatures, secrets compared in constant time and the ledger's stored digests.
public enum SHA256Digest {
    public static func hash<Bytes: ContiguousBytes>(_ bytes: Bytes) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBytes { raw in
            out.withUnsafeMutableBufferPointer { o in
                _ = SHA256(raw.bindMemory(to: UInt8.self).baseAddress, raw.count, o.baseAddress)
            }
        }
        return out
    }

    /// Uppercase, the way certificate fingerprints are written.
    public static func hex<Bytes: ContiguousBytes>(_ bytes: Bytes) -> String {
        Hex.lowercase(hash(bytes)).uppercased()
    }

    /// 64 lowercase hex characters: how the ledger stores nonces and evidence digests
    /// (`AuditRecord.evidenceSHA256`).
    public static func lowercaseHex<Bytes: ContiguousBytes>(_ bytes: Bytes) -> String {
        Hex.lowercase(hash(bytes))
    }

    /// Of the text's UTF-8 bytes.
    public static func lowercaseHex(_ text: String) -> String { lowercaseHex(Array(text.utf8)) }
}

/// OpenSSL keeps a per-thread error queue; drained so one failure never colours the next call.
@inline(__always) func clearOpenSSLErrors() { ERR_clear_error() }
