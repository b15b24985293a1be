import COpenSSL
import IAPCore

/// HMAC-SHA256 through OpenSSL: signs the gateway's webhooks so app backends can tell them from forgeries.
public enum HMACSHA256 {
    public static func mac(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = HMAC(EVP_sha256(), key, Int32(key.count), message, message.count, &out, &length)
        return Array(out.prefix(Int(length)))
    }

    public static func hex(key: [UInt8], message: [UInt8]) -> String {
        Hex.lowercase(mac(key: key, message: message))
    }
}
