import AppleTrust
import IAPCore

/// The appAccountToken an app passes to StoreKit for an account, derived so the gateway can check
/// it without storing a mapping: the first 16 bytes of SHA-256("iapgw-appAccountToken\0" + bundleId
/// + "\0" + account), formatted as a UUID with version 8 (RFC 9562, custom) and the RFC variant.
/// App backends compute the same value (documented in the README) and hand it to the app.
public enum AppAccountToken {
    public static func derive(bundleId: String, account: String) -> String {
        var bytes = Array(SHA256Digest.hash(Array("iapgw-appAccountToken\0\(bundleId)\0\(account)".utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x80
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        // 8-4-4-4-12 digits: the hyphens go into the digits' bytes (Substring slices of the hex
        // String, joined, cost more than the SHA-256 on every verify request).
        var text = Array(Hex.lowercase(bytes).utf8)
        for offset in [20, 16, 12, 8] { text.insert(UInt8(ascii: "-"), at: offset) }
        return String(decoding: text, as: UTF8.self)
    }
}
