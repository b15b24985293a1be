import Foundation

/// The appAccountToken the gateway expects for `account` of the app `bundleId`: the first 16 bytes
/// of SHA-256("iapgw-appAccountToken\0" + bundleId + "\0" + account) as a version-8 UUID (RFC 9562).
/// Pass it to StoreKit with the purchase; a transaction bought with another account's token is
/// refused APP_ACCOUNT_TOKEN_MISMATCH. `sha256` is any SHA-256: in an app CryptoKit's
/// `{ Array(SHA256.hash(data: Data($0))) }`, in IAPGatewayClient its own `IAPGatewaySHA256.hash`.
public func appAccountToken(bundleId: String, account: String, sha256: ([UInt8]) -> [UInt8]) -> UUID {
    var b = Array(sha256(Array("iapgw-appAccountToken\0\(bundleId)\0\(account)".utf8)).prefix(16))
    b[6] = (b[6] & 0x0F) | 0x80  // version 8: custom
    b[8] = (b[8] & 0x3F) | 0x80  // the RFC 9562 variant
    return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
                       b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
}
