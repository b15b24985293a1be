import COpenSSL
import Foundation
import IAPCore

/// SHA-256 through OpenSSL (one-shot; the inputs here are small).
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

    public static func lowercaseHex<Bytes: ContiguousBytes>(_ bytes: Bytes) -> String {
        Hex.lowercase(hash(bytes))
    }
}

/// OpenSSL keeps a per-thread error queue; drained so one failure never colours the next call.
@inline(__always) func clearOpenSSLErrors() { ERR_clear_error() }
