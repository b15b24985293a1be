import AppleTrust
import COpenSSL
import Foundation
import IAPCore

// Every OpenSSL call of the receipt code lives in this file; the chain itself is AppleTrust's
// `PinnedChainPolicy`, the same engine and rules JWS chains are checked with.

/// The pinned roots that legacy receipt signatures must chain to, and what the chain must be.
///
/// One store serves one purpose: Apple's roots and an Xcode StoreKit Testing key never share a
/// store, so which roots apply never depends on what the (unverified) payload claims to be.
final class ReceiptTrustStore: Sendable {
    private let chain: PinnedChainPolicy
    let requirement: SignerRequirement
    /// Signers whose chain and requirement this store verified, keyed by the exact bytes that
    /// decided them (`PKCS7SignedData.SignerRanges`). Apple signs every receipt of a period with
    /// one certificate, and rebuilding its chain (twice: ours and PKCS7_verify's) cost ten times
    /// the receipt's own signature check.
    let signers: VerifiedChainCache<VerifiedSigner>

    /// With no roots every signature is refused as UNTRUSTED_ROOT (fail closed, never "trust all").
    init(rootCertificates: [[UInt8]], requirement: SignerRequirement, cacheCapacity: Int = 16) throws(VerificationError) {
        chain = try PinnedChainPolicy(rootCertificates: rootCertificates.map { Data($0) })
        self.requirement = requirement
        signers = VerifiedChainCache(capacity: cacheCapacity)
    }

    /// What a verified signer leaves behind: its key, the digest its SignerInfo names, and the
    /// window in which its whole chain (through the pinned root) is valid.
    final class VerifiedSigner: @unchecked Sendable {
        let key: OpaquePointer
        let digest: OpaquePointer
        let validity: ChainValidity

        init(key: OpaquePointer, digest: OpaquePointer, validity: ChainValidity) {
            self.key = key
            self.digest = digest
            self.validity = validity
        }
        deinit { EVP_PKEY_free(key) }

        /// The SignerInfo's signature over the content, as PKCS7_signatureVerify checks it when
        /// there are no authenticated attributes: the named digest of the content, verified
        /// under the signer's key.
        func verify(signature: ArraySlice<UInt8>, content: [UInt8]) -> Bool {
            defer { ERR_clear_error() }
            guard let md = EVP_MD_CTX_new() else { return false }
            defer { EVP_MD_CTX_free(md) }
            guard EVP_DigestVerifyInit(md, nil, digest, nil, key) == 1 else { return false }
            return signature.withUnsafeBufferPointer { sig in
                content.withUnsafeBufferPointer { msg in
                    EVP_DigestVerify(md, sig.baseAddress, sig.count, msg.baseAddress, msg.count) == 1
                }
            }
        }
    }

    /// The cache key: the certificates, the digest algorithms and the signer's identity and
    /// algorithms, each a whole DER element (so their concatenation is unambiguous).
    private static func signerKey(_ der: [UInt8], _ ranges: PKCS7SignedData.SignerRanges) -> [UInt8] {
        Array(der[ranges.certificates]) + der[ranges.digestAlgorithms] + der[ranges.signerIdentity]
    }

    /// Verifies `signed` (parsed from `der`) at `time`: from the signer cache when these exact
    /// certificates and signer verified before (the validity window still checked at `time`,
    /// the signature still checked over the content), otherwise `verifyPKCS7(_:expectedContent:at:)`,
    /// whose success is then cached if the receipt carries no certificate outside its chain.
    func verifyPKCS7(_ der: [UInt8], signed: PKCS7SignedData, at time: Date) throws(VerificationError) {
        guard let ranges = signed.signer else {
            try verifyPKCS7(der, expectedContent: signed.content, at: time)
            return
        }
        let key = Self.signerKey(der, ranges)
        if let hit = key.withUnsafeBufferPointer({ signers.lookup($0) }) {
            try ValidityTime(try Self.seconds(time)).check(hit.validity)
            guard hit.verify(signature: der[ranges.signature], content: signed.content) else {
                throw VerificationError(.invalidSignature, "receipt signature does not match its content")
            }
            return
        }
        let (leaf, validity, carriesOnlyItsChain) = try verifyPKCS7(der, expectedContent: signed.content, at: time)
        // Which chain OpenSSL builds depends on the time when the receipt offers certificates it
        // did not use (it takes the first candidate issuer valid then); a hit at another time
        // would stand for a chain never built. Such receipts always verify fresh.
        guard carriesOnlyItsChain else { return }
        guard let digest = Self.digest(der[ranges.digestOID]), let publicKey = X509_get_pubkey(leaf.x509) else {
            ERR_clear_error()
            return  // verified, just not cacheable
        }
        key.withUnsafeBufferPointer { signers.store($0, VerifiedSigner(key: publicKey, digest: digest, validity: validity)) }
    }

    /// OpenSSL's digest for a DER OBJECT IDENTIFIER element (nil when it knows none).
    private static func digest(_ oid: ArraySlice<UInt8>) -> OpaquePointer? {
        oid.withUnsafeBufferPointer { b -> OpaquePointer? in
            var p: UnsafePointer<UInt8>? = b.baseAddress
            guard let object = d2i_ASN1_OBJECT(nil, &p, b.count) else { return nil }
            defer { ASN1_OBJECT_free(object) }
            return EVP_get_digestbyname(OBJ_nid2sn(OBJ_obj2nid(object)))
        }
    }

    /// Whether any root of this store is also a root of `other`.
    func sharesRoot(with other: ReceiptTrustStore) -> Bool { chain.sharesRoot(with: other.chain) }

    /// What a PKCS#7 signer's chain must be, beyond ending in a pinned root.
    enum SignerRequirement: Sendable {
        /// App Store receipts: exactly leaf → intermediate → pinned root, the intermediate marked
        /// as Apple WWDR and the leaf as receipt signing. Chaining to Apple Inc. Root alone proves
        /// nothing: every Apple developer certificate does that too.
        case appleReceiptSigning
        /// Any chain to a pinned root: only for roots pinned for one narrow purpose (Xcode's
        /// self-signed StoreKit Testing key, legacy transaction receipts' roots).
        case pinnedRootOnly

        /// The rules on the chain OpenSSL built (leaf first, pinned root last), in order.
        func policies(_ pinnedRoot: PinnedRoot) -> [any ChainPolicy] {
            switch self {
            case .appleReceiptSigning: [pinnedRoot, ExactChainLength(3, refusedAs: .invalidCertificateChain), AppleMarkers()]
            case .pinnedRootOnly: [pinnedRoot]
            }
        }
    }

    /// Verifies a PKCS#7 SignedData receipt: exactly one signer, whose chain to a pinned root at
    /// `time` meets this store's `requirement`, a signature over the content, and signed content that is
    /// exactly `expectedContent` (what our own parser read), so OpenSSL and this package cannot
    /// disagree on what was signed.
    /// Returns the signer's certificate, the validity window of the chain it was verified through,
    /// and whether every certificate the receipt carries is in that chain.
    @discardableResult
    func verifyPKCS7(_ der: [UInt8], expectedContent: [UInt8], at time: Date) throws(VerificationError)
        -> (signer: X509Certificate, validity: ChainValidity, carriesOnlyItsChain: Bool) {
        defer { ERR_clear_error() }
        let p7: UnsafeMutablePointer<PKCS7>? = der.withUnsafeBufferPointer { buffer in
            var p: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PKCS7(nil, &p, buffer.count)
        }
        guard let p7 else { throw VerificationError(.malformedReceipt, "OpenSSL cannot parse the receipt as PKCS#7") }
        defer { PKCS7_free(p7) }
        guard iapgw_PKCS7_type_is_signed(p7) == 1, let signed = iapgw_PKCS7_signed_content(p7) else {
            throw VerificationError(.malformedReceipt, "receipt is not PKCS#7 SignedData with data content")
        }
        // Compared in place (memcmp), not copied: the content is the whole ~80 KB payload.
        let openSSLCount = Int(ASN1_STRING_length(signed))
        let sameContent = openSSLCount == expectedContent.count && expectedContent.withUnsafeBufferPointer { mine in
            openSSLCount == 0 || (ASN1_STRING_get0_data(signed).map { memcmp($0, mine.baseAddress!, openSSLCount) == 0 } ?? false)
        }
        guard sameContent else {
            throw VerificationError(.malformedReceipt, "receipt content is ambiguous (parsers disagree)")
        }
        // PKCS7_verify accepts if every signer verifies; a second SignerInfo is never Apple's and
        // would make "the signer" we check below ambiguous.
        guard let infos = PKCS7_get_signer_info(p7), iapgw_sk_PKCS7_SIGNER_INFO_num(infos) == 1 else {
            throw VerificationError(.invalidSignature, "receipt must have exactly one signer")
        }
        // The sender names the digest; Apple's receipts (and Xcode's) use SHA-256, the older ones
        // SHA-1. Anything else OpenSSL would also verify (MD5, SHA-3, ...) is refused: fail closed.
        let digest = iapgw_PKCS7_first_signer_digest_nid(p7)
        guard digest == NID_sha256 || digest == NID_sha1 else {
            throw VerificationError(.invalidSignature, "receipt signer's digest is neither SHA-256 nor SHA-1")
        }
        guard let signers = PKCS7_get0_signers(p7, nil, 0) else {
            throw VerificationError(.invalidSignature, "receipt has no usable signer certificate")
        }
        defer { iapgw_sk_X509_free(signers) }
        guard iapgw_sk_X509_num(signers) == 1, let leaf = iapgw_sk_X509_value(signers, 0) else {
            throw VerificationError(.invalidSignature, "receipt must have exactly one signer certificate")
        }
        let second = try Self.seconds(time)
        // Our own chain build first: PKCS7_verify would only say the signer chains to some pinned
        // root, not which chain it is.
        let signer = try Self.retained(leaf)
        let carried = try Self.retained(iapgw_PKCS7_signers_certs(p7))
        let built = try verifyChain(leaf: signer, intermediates: carried, at: second)
        let store = try chain.makeStore(checkingTimeAt: second)
        defer { X509_STORE_free(store) }
        guard PKCS7_verify(p7, nil, store, nil, nil, 0) == 1 else {
            throw VerificationError(.invalidSignature, "receipt signature does not match its content")
        }
        // OpenSSL counts a certificate as expired at its notAfter second itself (X509_cmp_time
        // treats "equal" as "earlier"); the window a cache hit is checked against must too.
        var validity = ChainValidity(built)
        validity.notAfter -= 1
        let carriesOnlyItsChain = carried.count <= built.count
            && carried.allSatisfy { c in built.contains { X509_cmp(c.x509, $0.x509) == 0 } }
        return (signer, validity, carriesOnlyItsChain)
    }

    /// Verifies an RSA PKCS#1 v1.5 signature by `certificateDER`, whose chain (through
    /// `intermediates`) must reach a pinned root at `time`.
    func verifyRSASignature(_ signature: [UInt8], over data: [UInt8], sha256: Bool, certificateDER: [UInt8],
                            intermediates: [[UInt8]], at time: Date) throws(VerificationError) {
        defer { ERR_clear_error() }
        let leaf = try X509Certificate(der: Data(certificateDER))
        let extra = try intermediates.map { (der) throws(VerificationError) in try X509Certificate(der: Data(der)) }
        try verifyChain(leaf: leaf, intermediates: extra, at: try Self.seconds(time))

        // An owned key reference: X509_get0_pubkey would borrow from `leaf`, which Swift may free
        // before the digest below runs.
        guard let key = withExtendedLifetime(leaf, { X509_get_pubkey(leaf.x509) }) else {
            throw VerificationError(.invalidSignature, "signing certificate has no public key")
        }
        defer { EVP_PKEY_free(key) }
        guard EVP_PKEY_get_base_id(key) == NID_rsaEncryption else {
            throw VerificationError(.invalidSignature, "signing certificate has no RSA key")
        }
        guard let md = EVP_MD_CTX_new() else { throw VerificationError(.invalidSignature, "allocation failed") }
        defer { EVP_MD_CTX_free(md) }
        guard EVP_DigestVerifyInit(md, nil, sha256 ? EVP_sha256() : EVP_sha1(), nil, key) == 1 else {
            throw VerificationError(.invalidSignature, "cannot initialise RSA verification")
        }
        let ok = signature.withUnsafeBufferPointer { sig in
            data.withUnsafeBufferPointer { msg in
                EVP_DigestVerify(md, sig.baseAddress, sig.count, msg.baseAddress, msg.count)
            }
        }
        guard ok == 1 else { throw VerificationError(.invalidSignature, "RSA signature does not verify") }
    }

    /// The chain OpenSSL builds at `second` (dates checked by OpenSSL, as PKCS7_verify will check
    /// them again), then this store's requirement on it.
    @discardableResult
    private func verifyChain(leaf: X509Certificate, intermediates: [X509Certificate],
                             at second: Int64) throws(VerificationError) -> [X509Certificate] {
        let built = try chain.build(leaf: leaf, intermediates: intermediates, maxIntermediates: nil, checkingTimeAt: second)
        try requirement.policies(chain.pinnedRoot).check(built)
        return built
    }

    /// `time_t(Double)` traps on NaN, infinities and out-of-range values; a caller-supplied date
    /// must never crash the verifier.
    private static func seconds(_ time: Date) throws(VerificationError) -> Int64 {
        guard let seconds = Int64(exactly: time.timeIntervalSince1970.rounded(.down)) else {
            throw VerificationError(.invalidCertificateChain, "verification time is not a representable date")
        }
        return seconds
    }

    /// A certificate the PKCS#7 structure owns, as a wrapper holding its own reference.
    private static func retained(_ x509: OpaquePointer) throws(VerificationError) -> X509Certificate {
        guard X509_up_ref(x509) == 1 else { throw VerificationError(.invalidCertificateChain, "allocation failed") }
        return X509Certificate(owning: x509)
    }

    /// Every certificate the PKCS#7 structure carries (none when it carries no set).
    private static func retained(_ stack: OpaquePointer?) throws(VerificationError) -> [X509Certificate] {
        guard let stack else { return [] }
        var certificates: [X509Certificate] = []
        for i in 0..<iapgw_sk_X509_num(stack) {
            guard let x509 = iapgw_sk_X509_value(stack, i) else { continue }
            certificates.append(try retained(x509))
        }
        return certificates
    }
}
