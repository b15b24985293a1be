import COpenSSL
import Foundation
import IAPCore

/// SHA-256 through OpenSSL, so the ledger can store nonces hashed and callers can compute an audit
/// evidence digest in the form `AuditRecord.evidenceSHA256` takes (64 lowercase hex characters).
public enum LedgerDigest {
    public static func sha256Hex(_ data: Data) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        data.withUnsafeBytes { raw in
            digest.withUnsafeMutableBufferPointer { out in
                _ = SHA256(raw.bindMemory(to: UInt8.self).baseAddress, raw.count, out.baseAddress)
            }
        }
        return Hex.lowercase(digest)
    }

    public static func sha256Hex(_ text: String) -> String { sha256Hex(Data(text.utf8)) }
}
