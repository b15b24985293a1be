import Foundation
import IAPCore

/// Verifies legacy app receipts (PKCS#7 SignedData) against pinned roots.
public struct ReceiptVerifier: Sendable {
    let appleTrust: ReceiptTrustStore
    let xcodeTrust: ReceiptTrustStore
    /// Xcode StoreKit Testing receipts are accepted only when this is set AND they verify against
    /// one of the separately pinned Xcode roots; otherwise they are NOT_APP_STORE_RECEIPT.
    public let allowXcodeReceipts: Bool

    /// - Parameters:
    ///   - rootCertificates: DER roots for App Store receipts (Apple Inc. Root). Receipts not of
    ///     type Xcode verify only against these, and only through Apple's receipt-signing chain.
    ///   - xcodeRootCertificates: DER StoreKit Testing certificates. Receipts of type Xcode verify
    ///     only against these, and only when `allowXcodeReceipts` is set. They may not also be App
    ///     Store roots (INVALID_CONFIGURATION).
    public init(rootCertificates: [Data], xcodeRootCertificates: [Data] = [],
                allowXcodeReceipts: Bool = false) throws(VerificationError) {
        appleTrust = try ReceiptTrustStore(rootCertificates: rootCertificates.map { Array($0) }, requirement: .appleReceiptSigning)
        xcodeTrust = try ReceiptTrustStore(rootCertificates: xcodeRootCertificates.map { Array($0) }, requirement: .pinnedRootOnly)
        if appleTrust.sharesRoot(with: xcodeTrust) {
            throw VerificationError(.invalidConfiguration, "an Xcode root may not also be an App Store receipt root")
        }
        self.allowXcodeReceipts = allowXcodeReceipts
    }

    /// Parses and verifies a receipt, returning its payload only if everything holds.
    ///
    /// - Parameter time: when the certificates must have been valid. `nil` means the receipt's own
    ///   creation date: Apple's receipt signing certificates expire while the receipts they signed
    ///   stay valid evidence of what was bought.
    @discardableResult
    public func verify(_ receipt: [UInt8], at time: Date? = nil) throws(VerificationError) -> AppReceipt {
        let signed = try PKCS7SignedData.parse(receipt)
        let payload = try AppReceipt.parsePayload(signed.content)
        try verify(receipt, parsed: payload, signed: signed, at: time)
        return payload
    }

    func verify(_ receipt: [UInt8], parsed payload: AppReceipt, signed: PKCS7SignedData, at time: Date?) throws(VerificationError) {
        if payload.isXcodeReceipt && !allowXcodeReceipts {
            throw VerificationError(.notAppStoreReceipt, "receipt type Xcode is a local StoreKit test receipt, not an App Store receipt")
        }
        guard let when = time ?? payload.creationDate.map({ Date(timeIntervalSince1970: Double($0) / 1000) }) else {
            throw VerificationError(.malformedReceipt, "receipt has no creation date to verify its certificates at")
        }
        // The payload's type only selects which store to try; the store's roots decide. An Xcode
        // key cannot vouch for a "Production" receipt, and Apple's chain is not an Xcode root.
        let trust = payload.isXcodeReceipt ? xcodeTrust : appleTrust
        try trust.verifyPKCS7(receipt, signed: signed, at: when)
    }
}

/// How much a caller is prepared to trust a receipt it reads.
public enum ReceiptReadMode: Sendable, Equatable {
    /// Any failure to verify the signature is thrown.
    case verified
    /// Parse and report; the signature is still checked when roots are given, and its outcome is
    /// reported, but a failure does not throw. For inspection and migration tooling only.
    case unverified
}

/// A receipt with the outcome of its signature check.
public struct VerifiedAppReceipt: Sendable {
    public let receipt: AppReceipt
    public let mode: ReceiptReadMode
    /// Whether the PKCS#7 signature and its chain to a pinned root verified.
    public let signatureVerified: Bool
    /// Why the signature did not verify (nil when it did).
    public let signatureError: VerificationError?

    /// Every transaction id and original transaction id. Empty for a receipt whose signature did
    /// not verify, unless the caller explicitly read it `.unverified`: ids from an unsigned receipt
    /// are claims, not evidence.
    public var transactionIds: [String] {
        signatureVerified || mode == .unverified ? receipt.allTransactionIds : []
    }
}

/// The one entry point for legacy app receipts as clients send them (base64).
public struct AppReceiptReader: Sendable {
    private let verifier: ReceiptVerifier
    public let maxBase64Bytes: Int

    public init(roots: [Data], xcodeRoots: [Data] = [], allowXcodeReceipts: Bool = false,
                maxBase64Bytes: Int = StrictBase64.defaultMaxInputBytes) throws(VerificationError) {
        verifier = try ReceiptVerifier(rootCertificates: roots, xcodeRootCertificates: xcodeRoots,
                                       allowXcodeReceipts: allowXcodeReceipts)
        self.maxBase64Bytes = maxBase64Bytes
    }

    /// Decodes, parses and verifies. In `.verified` mode any failure throws; in `.unverified` mode
    /// only input that does not parse throws, and the signature outcome is in the result.
    public func read(base64: String, mode: ReceiptReadMode = .verified, at time: Date? = nil) throws(VerificationError) -> VerifiedAppReceipt {
        let bytes = try StrictBase64.decode(base64, maxInputBytes: maxBase64Bytes)
        return try read(der: bytes, mode: mode, at: time)
    }

    public func read(der bytes: [UInt8], mode: ReceiptReadMode = .verified, at time: Date? = nil) throws(VerificationError) -> VerifiedAppReceipt {
        let signed = try PKCS7SignedData.parse(bytes)
        let payload = try AppReceipt.parsePayload(signed.content)
        do {
            try verifier.verify(bytes, parsed: payload, signed: signed, at: time)
            return VerifiedAppReceipt(receipt: payload, mode: mode, signatureVerified: true, signatureError: nil)
        } catch {
            if mode == .verified { throw error }
            return VerifiedAppReceipt(receipt: payload, mode: mode, signatureVerified: false, signatureError: error)
        }
    }
}
