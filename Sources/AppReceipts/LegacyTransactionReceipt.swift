import Foundation
import IAPCore

/// An iOS 6 era `SKPaymentTransaction.transactionReceipt`: an old-style plist holding the
/// base64 `purchase-info` (another plist) and a base64 `signature` blob:
/// version byte (2 or 3) ‖ RSA signature (128 or 256 bytes) ‖ 4-byte big-endian certificate
/// length ‖ DER certificate. The signed message is the version byte followed by the decoded
/// purchase-info bytes, hashed with SHA-1 (version 2) or SHA-256 (version 3).
public struct LegacyTransactionReceipt: Sendable {
    /// The outer plist's "environment", "pod" and "signing-status". The signature covers only
    /// purchase-info, so these are ATTACKER-CONTROLLED: shown for inspection, never a basis for
    /// any decision. Use `environment` (from the signed purchase-info) instead.
    public let unsignedEnvironment: String?
    public let unsignedPod: String?
    public let unsignedSigningStatus: String?
    /// Every purchase-info field as Apple wrote it (signed).
    public let purchaseInfo: [String: String]
    /// The environment stated inside the signed purchase-info, if it states one; nil otherwise
    /// (the unsigned outer value is deliberately not a fallback).
    public var environment: String? { purchaseInfo["environment"] }
    /// The purchase, in the same shape as an app receipt's in-app record.
    public let purchase: InAppPurchaseRecord
    public var bundleId: String? { purchaseInfo["bid"] }
    public var bundleVersion: String? { purchaseInfo["bvrs"] }
    public var appItemId: String? { purchaseInfo["app-item-id"] }

    public let signatureVersion: UInt8
    public let signature: [UInt8]
    public let certificate: [UInt8]
    let purchaseInfoBytes: [UInt8]

    /// The message the signature covers.
    var signedMessage: [UInt8] { [signatureVersion] + purchaseInfoBytes }

    public static func parse(base64: String) throws(VerificationError) -> LegacyTransactionReceipt {
        try parse(plist: StrictBase64.decode(base64, maxInputBytes: 512 * 1024))
    }

    public static func parse(plist bytes: [UInt8]) throws(VerificationError) -> LegacyTransactionReceipt {
        let outer = try OldStylePlist.parseDictionary(bytes)
        guard let signatureText = outer["signature"], let purchaseText = outer["purchase-info"] else {
            throw VerificationError(.malformedReceipt, "transaction receipt lacks signature or purchase-info")
        }
        let blob = try StrictBase64.decode(signatureText)
        let infoBytes = try StrictBase64.decode(purchaseText)
        let info = try OldStylePlist.parseDictionary(infoBytes)

        guard let version = blob.first else { throw VerificationError(.malformedReceipt, "empty transaction receipt signature") }
        let signatureLength: Int
        switch version {
        case 2: signatureLength = 128
        case 3: signatureLength = 256
        default: throw VerificationError(.malformedReceipt, "unknown transaction receipt signature version \(version)")
        }
        let lengthAt = 1 + signatureLength
        guard blob.count >= lengthAt + 4 else { throw VerificationError(.malformedReceipt, "transaction receipt signature is truncated") }
        let certLength = blob[lengthAt..<(lengthAt + 4)].reduce(0) { $0 << 8 | Int($1) }
        guard certLength > 0, certLength == blob.count - lengthAt - 4 else {
            throw VerificationError(.malformedReceipt, "transaction receipt certificate length \(certLength) does not match the blob")
        }
        return LegacyTransactionReceipt(
            unsignedEnvironment: outer["environment"], unsignedPod: outer["pod"], unsignedSigningStatus: outer["signing-status"],
            purchaseInfo: info, purchase: try record(from: info), signatureVersion: version,
            signature: Array(blob[1..<lengthAt]), certificate: Array(blob[(lengthAt + 4)...]), purchaseInfoBytes: infoBytes)
    }

    private static func record(from info: [String: String]) throws(VerificationError) -> InAppPurchaseRecord {
        func number(_ key: String) throws(VerificationError) -> Int64? {
            guard let text = info[key], !text.isEmpty else { return nil }
            guard text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int64(text) else {
                throw VerificationError(.malformedReceipt, "purchase-info \(key) is not a decimal number")
            }
            return n
        }
        func flag(_ key: String) throws(VerificationError) -> Bool? {
            switch info[key] {
            case nil: return nil
            case "true": return true
            case "false": return false
            default: throw VerificationError(.malformedReceipt, "purchase-info \(key) is not true or false")
            }
        }
        var r = InAppPurchaseRecord()
        r.quantity = try number("quantity")
        r.productId = info["product-id"]
        r.transactionId = info["transaction-id"]
        r.originalTransactionId = info["original-transaction-id"]
        r.purchaseDate = try number("purchase-date-ms")
        r.originalPurchaseDate = try number("original-purchase-date-ms")
        // Subscriptions carry "expires-date" in milliseconds; some also write "expires-date-ms".
        if let ms = try number("expires-date-ms") { r.expiresDate = ms } else { r.expiresDate = try number("expires-date") }
        r.cancellationDate = try number("cancellation-date-ms")
        r.webOrderLineItemId = try number("web-order-line-item-id")
        r.isTrialPeriod = try flag("is-trial-period")
        r.isInIntroOfferPeriod = try flag("is-in-intro-offer-period")
        return r
    }
}

/// Verifies iOS 6 transaction receipts: the embedded certificate must chain (through the given
/// intermediates) to a pinned root, and its RSA key must have signed the purchase-info.
///
/// KNOWN GAP: unlike app receipts, no check here that the signer is Apple's receipt-signing
/// certificate (chain shape, marker OIDs). No real iOS 6 transaction receipt is available to
/// confirm which certificates and OIDs Apple used for them, and guessing would either refuse
/// genuine receipts or give false assurance. So ANY certificate under the pinned roots can sign
/// one: pin a root (or issuing CA) used only for these receipts, never Apple Inc. Root alone.
public struct LegacyTransactionReceiptVerifier: Sendable {
    private let trust: ReceiptTrustStore
    private let intermediates: [[UInt8]]

    public init(rootCertificates: [Data], intermediateCertificates: [Data] = []) throws(VerificationError) {
        trust = try ReceiptTrustStore(rootCertificates: rootCertificates.map { Array($0) }, requirement: .pinnedRootOnly)
        intermediates = intermediateCertificates.map { Array($0) }
    }

    /// - Parameter time: when the certificates must have been valid; `nil` means the purchase
    ///   date the receipt states (its signing certificate has long expired).
    public func verify(_ receipt: LegacyTransactionReceipt, at time: Date? = nil) throws(VerificationError) {
        guard let when = time ?? receipt.purchase.purchaseDate.map({ Date(timeIntervalSince1970: Double($0) / 1000) }) else {
            throw VerificationError(.malformedReceipt, "transaction receipt has no purchase-date-ms to verify at")
        }
        try trust.verifyRSASignature(receipt.signature, over: receipt.signedMessage, sha256: receipt.signatureVersion == 3,
                                     certificateDER: receipt.certificate, intermediates: intermediates, at: when)
    }
}
