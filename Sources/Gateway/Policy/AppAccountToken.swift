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
        let hex = Hex.lowercase(bytes)
        let parts = [hex.prefix(8), hex.dropFirst(8).prefix(4), hex.dropFirst(12).prefix(4),
                     hex.dropFirst(16).prefix(4), hex.dropFirst(20)]
        return parts.joined(separator: "-")
    }
}
