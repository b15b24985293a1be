import COpenSSL
import Foundation
import IAPCore

// Every OpenSSL call of the receipt code lives in this file, so it can later move beside
// AppleTrust's X.509 code without touching the parsers.

/// One parsed X.509 certificate, owned.
final class OpenSSLCertificate: @unchecked Sendable {
    let pointer: OpaquePointer

    init(der: [UInt8]) throws(VerificationError) {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var p: UnsafePointer<UInt8>? = buffer.baseAddress
            guard let x = d2i_X509(nil, &p, buffer.count) else { return nil }
            // Trailing bytes after the certificate would let two parsers disagree on what it is.
            guard let base = buffer.baseAddress, p == base + buffer.count else { X509_free(x); return nil }
            return x
        }
        ERR_clear_error()
        guard let parsed else { throw VerificationError(.malformedCertificate, "certificate is not X.509 DER") }
        pointer = parsed
    }

    deinit { X509_free(pointer) }
}

/// The pinned roots that legacy receipt signatures must chain to: an `X509_STORE` with only these
/// certificates, no default paths, no partial chains.
///
/// One store serves one purpose: Apple's roots and an Xcode StoreKit Testing key never share a
/// store, so which roots apply never depends on what the (unverified) payload claims to be.
final class ReceiptTrustStore: @unchecked Sendable {
    private let roots: [OpenSSLCertificate]
    let requirement: SignerRequirement

    /// With no roots every signature is refused as UNTRUSTED_ROOT (fail closed, never "trust all").
    init(rootCertificates: [[UInt8]], requirement: SignerRequirement) throws(VerificationError) {
        var parsed: [OpenSSLCertificate] = []
        for der in rootCertificates { parsed.append(try OpenSSLCertificate(der: der)) }
        roots = parsed
        self.requirement = requirement
    }

    /// Whether any root of this store is also a root of `other`.
    func sharesRoot(with other: ReceiptTrustStore) -> Bool {
        roots.contains { mine in other.roots.contains { X509_cmp(mine.pointer, $0.pointer) == 0 } }
    }

    /// A fresh store per verification: its verify time is per call, and a shared mutable store
    /// would race between threads.
    private func makeStore(at time: Date) throws(VerificationError) -> OpaquePointer {
        guard let store = X509_STORE_new() else { throw VerificationError(.invalidCertificateChain, "X509_STORE_new failed") }
        // A root that failed to go in would leave a store that silently trusts less (or, with a
        // later fallback, something else): fail closed instead.
        for root in roots where X509_STORE_add_cert(store, root.pointer) != 1 {
            X509_STORE_free(store)
            throw VerificationError(.invalidCertificateChain, "cannot add a pinned root to the trust store")
        }
        X509_STORE_set_purpose(store, X509_PURPOSE_ANY)
        let param = X509_STORE_get0_param(store)
        // time_t(Double) traps on NaN, infinities and out-of-range values; a caller-supplied
        // date must never crash the verifier.
        guard let seconds = time_t(exactly: time.timeIntervalSince1970.rounded(.down)) else {
            X509_STORE_free(store)
            throw VerificationError(.invalidCertificateChain, "verification time is not a representable date")
        }
        X509_VERIFY_PARAM_set_time(param, seconds)
        return store
    }

    /// What a PKCS#7 signer's chain must be, beyond ending in a pinned root.
    enum SignerRequirement: Sendable {
        /// App Store receipts: exactly leaf → intermediate → pinned root, the intermediate marked
        /// as Apple WWDR and the leaf as receipt signing. Chaining to Apple Inc. Root alone proves
        /// nothing: every Apple developer certificate does that too.
        case appleReceiptSigning
        /// Any chain to a pinned root: only for roots pinned for one narrow purpose (Xcode's
        /// self-signed StoreKit Testing key).
        case pinnedRootOnly
    }

    /// Apple's marker on WWDR intermediates (seen on WWDR G1 and G5 in the real receipts).
    static let wwdrIntermediateOID = "1.2.840.113635.100.6.2.1"
    /// Apple's marker on "Mac App Store and iTunes Store Receipt Signing" leaves.
    static let receiptSigningLeafOID = "1.2.840.113635.100.6.11.1"

    /// Verifies a PKCS#7 SignedData receipt: exactly one signer, whose chain to a pinned root at
    /// `time` meets this store's `requirement`, a signature over the content, and signed content that is
    /// exactly `expectedContent` (what our own parser read), so OpenSSL and this package cannot
    /// disagree on what was signed.
    func verifyPKCS7(_ der: [UInt8], expectedContent: [UInt8], at time: Date) throws(VerificationError) {
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
        guard let signers = PKCS7_get0_signers(p7, nil, 0) else {
            throw VerificationError(.invalidSignature, "receipt has no usable signer certificate")
        }
        defer { iapgw_sk_X509_free(signers) }
        guard iapgw_sk_X509_num(signers) == 1, let leaf = iapgw_sk_X509_value(signers, 0) else {
            throw VerificationError(.invalidSignature, "receipt must have exactly one signer certificate")
        }
        let store = try makeStore(at: time)
        defer { X509_STORE_free(store) }
        // Our own chain build first: PKCS7_verify would only say the signer chains to some pinned
        // root, not which chain it is.
        try verifyChain(leaf: leaf, untrusted: iapgw_PKCS7_signers_certs(p7), store: store, requirement: requirement)
        guard PKCS7_verify(p7, nil, store, nil, nil, 0) == 1 else {
            throw VerificationError(.invalidSignature, "receipt signature does not match its content")
        }
    }

    /// Verifies an RSA PKCS#1 v1.5 signature by `certificateDER`, whose chain (through
    /// `intermediates`) must reach a pinned root at `time`.
    func verifyRSASignature(_ signature: [UInt8], over data: [UInt8], sha256: Bool, certificateDER: [UInt8],
                            intermediates: [[UInt8]], at time: Date) throws(VerificationError) {
        defer { ERR_clear_error() }
        let leaf = try OpenSSLCertificate(der: certificateDER)
        let extra = try intermediates.map { (der) throws(VerificationError) in try OpenSSLCertificate(der: der) }
        let store = try makeStore(at: time)
        defer { X509_STORE_free(store) }
        // The stack owns a reference to each certificate (up_ref, pop_free): a raw pointer taken
        // from a Swift object is only valid while that object lives, and Swift may release it
        // right after its last use, before OpenSSL is done with the stack.
        guard let untrusted = iapgw_sk_X509_new_null() else { throw VerificationError(.invalidCertificateChain, "allocation failed") }
        defer { iapgw_sk_X509_pop_free(untrusted) }
        for cert in extra {
            guard X509_up_ref(cert.pointer) == 1 else { throw VerificationError(.invalidCertificateChain, "allocation failed") }
            guard iapgw_sk_X509_push(untrusted, cert.pointer) > 0 else {
                X509_free(cert.pointer)
                throw VerificationError(.invalidCertificateChain, "allocation failed")
            }
        }
        try withExtendedLifetime(leaf) { () throws(VerificationError) in
            try verifyChain(leaf: leaf.pointer, untrusted: untrusted, store: store, requirement: requirement)
        }

        // An owned key reference: X509_get0_pubkey would borrow from `leaf`, which Swift may free
        // before the digest below runs.
        guard let key = withExtendedLifetime(leaf, { X509_get_pubkey(leaf.pointer) }) else {
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

    private func verifyChain(leaf: OpaquePointer, untrusted: OpaquePointer?, store: OpaquePointer,
                             requirement: SignerRequirement) throws(VerificationError) {
        guard let ctx = X509_STORE_CTX_new() else { throw VerificationError(.invalidCertificateChain, "allocation failed") }
        defer { X509_STORE_CTX_free(ctx) }
        guard X509_STORE_CTX_init(ctx, store, leaf, untrusted) == 1 else {
            throw VerificationError(.invalidCertificateChain, "cannot initialise chain verification")
        }
        if X509_verify_cert(ctx) == 1 {
            guard let chain = X509_STORE_CTX_get0_chain(ctx) else {
                throw VerificationError(.invalidCertificateChain, "verified chain is unavailable")
            }
            try check(chain: chain, requirement)
            return
        }
        let code = X509_STORE_CTX_get_error(ctx)
        let reason = String(cString: X509_verify_cert_error_string(Int(code)))
        switch code {
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
             X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN, X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT,
             X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
            throw VerificationError(.untrustedRoot, "signer chain does not end in a pinned root (\(reason))")
        case X509_V_ERR_CERT_HAS_EXPIRED:
            throw VerificationError(.certificateExpired, "a certificate in the signer chain was expired at the verification time")
        case X509_V_ERR_CERT_NOT_YET_VALID:
            throw VerificationError(.certificateNotYetValid, "a certificate in the signer chain was not yet valid at the verification time")
        default:
            throw VerificationError(.invalidCertificateChain, "signer chain does not verify (\(reason))")
        }
    }

    /// The chain OpenSSL built (leaf first, trust anchor last) against `requirement`.
    private func check(chain: OpaquePointer, _ requirement: SignerRequirement) throws(VerificationError) {
        let count = Int(iapgw_sk_X509_num(chain))
        guard count >= 1, let anchor = iapgw_sk_X509_value(chain, Int32(count - 1)),
              roots.contains(where: { X509_cmp($0.pointer, anchor) == 0 }) else {
            throw VerificationError(.untrustedRoot, "signer chain does not end in a pinned root")
        }
        switch requirement {
        case .pinnedRootOnly:
            return
        case .appleReceiptSigning:
            guard count == 3, let leaf = iapgw_sk_X509_value(chain, 0), let intermediate = iapgw_sk_X509_value(chain, 1) else {
                throw VerificationError(.invalidCertificateChain, "receipt signer chain has \(count) certificates, not leaf, intermediate and root")
            }
            guard try Self.has(extension: Self.wwdrIntermediateOID, intermediate) else {
                throw VerificationError(.missingAppleOID, "receipt signer's intermediate is not an Apple WWDR certificate authority")
            }
            guard try Self.has(extension: Self.receiptSigningLeafOID, leaf) else {
                throw VerificationError(.missingAppleOID, "receipt signer is not an Apple receipt signing certificate")
            }
        }
    }

    private static func has(extension oid: String, _ certificate: OpaquePointer) throws(VerificationError) -> Bool {
        guard let object = OBJ_txt2obj(oid, 1) else { throw VerificationError(.invalidCertificateChain, "allocation failed") }
        defer { ASN1_OBJECT_free(object) }
        return X509_get_ext_by_OBJ(certificate, object, -1) >= 0
    }
}
