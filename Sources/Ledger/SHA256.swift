import COpenSSL
import Foundation

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
        return digest.map { byte in byte < 16 ? "0" + String(byte, radix: 16) : String(byte, radix: 16) }.joined()
    }

    public static func sha256Hex(_ text: String) -> String { sha256Hex(Data(text.utf8)) }
}
