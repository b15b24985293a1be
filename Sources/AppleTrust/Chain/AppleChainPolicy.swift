import COpenSSL
import Foundation
import IAPCore

/// The window (seconds since 1970) in which every certificate of a verified chain is valid.
struct ChainValidity: Sendable, Equatable {
    var notBefore: Int64
    var notAfter: Int64
    func contains(_ second: Int64) -> Bool { notBefore <= second && second <= notAfter }
}

/// Apple's JWS chain rule: exactly leaf → intermediate → pinned root, each valid at a given time,
/// with Apple's marker OIDs. OpenSSL builds and checks the chain against a store holding only the
/// pinned roots (partial chains off); this type adds what OpenSSL does not know about.
final class AppleChainPolicy: @unchecked Sendable {
    static let intermediateOID = "1.2.840.113635.100.6.2.1"
    static let leafOID = "1.2.840.113635.100.6.11.1"

    let roots: [X509Certificate]
    private let rootKeys: [ECPublicKey?]
    private let store: OpaquePointer

    init(rootCertificates: [Data]) throws(VerificationError) {
        guard !rootCertificates.isEmpty else { throw VerificationError(.invalidConfiguration, "no root certificate pinned") }
        var roots: [X509Certificate] = []
        for der in rootCertificates { roots.append(try X509Certificate(der: der)) }
        guard let store = X509_STORE_new() else { throw VerificationError(.invalidConfiguration, "X509_STORE_new failed") }
        for root in roots where X509_STORE_add_cert(store, root.x509) != 1 {
            X509_STORE_free(store)
            clearOpenSSLErrors()
            throw VerificationError(.invalidConfiguration, "cannot pin root \(root.subjectCommonName)")
        }
        self.roots = roots
        self.rootKeys = roots.map(\.publicKey)
        self.store = store
    }

    deinit { X509_STORE_free(store) }

    /// OCSP responses must chain to the same pinned roots.
    var storeForOCSP: OpaquePointer { store }

    /// Checks `chain` (x5c order: leaf, intermediate, root) at `second`; returns its validity window.
    func verify(_ chain: [X509Certificate], at second: Int64) throws(VerificationError) -> ChainValidity {
        let window = try verifyStructure(chain)
        try Self.requireValid(window, at: second)
        return window
    }

    /// Everything about the chain that does not depend on a date: x5c[2] pinned, Apple's marker
    /// OIDs, and OpenSSL building leaf → intermediate → pinned root with every signature checked
    /// (time checks off). Runs before the JWS signature and before the payload is even decoded,
    /// so a token from any other PKI is UNTRUSTED_ROOT whatever its payload says. Returns the
    /// window in which the whole chain is valid; `requireValid` applies it to the payload's date.
    func verifyStructure(_ chain: [X509Certificate]) throws(VerificationError) -> ChainValidity {
        guard chain.count == 3 else { throw VerificationError(.invalidChainLength, "x5c must hold exactly 3 certificates") }
        let (leaf, intermediate, presentedRoot) = (chain[0], chain[1], chain[2])
        try requirePinned(presentedRoot)
        guard intermediate.hasExtension(oid: Self.intermediateOID) else {
            throw VerificationError(.missingAppleOID, "intermediate lacks Apple's WWDR marker OID \(Self.intermediateOID)")
        }
        guard leaf.hasExtension(oid: Self.leafOID) else {
            throw VerificationError(.missingAppleOID, "leaf lacks Apple's marker OID \(Self.leafOID)")
        }
        return try runOpenSSL(leaf: leaf, intermediate: intermediate)
    }

    /// The chain must be valid at `second` (each certificate's notBefore...notAfter, inclusive, as
    /// OpenSSL checks them).
    static func requireValid(_ window: ChainValidity, at second: Int64) throws(VerificationError) {
        guard window.contains(second) else {
            throw VerificationError(second < window.notBefore ? .certificateNotYetValid : .certificateExpired,
                                    "the signing chain is not valid at \(second)")
        }
    }

    /// x5c[2] must be a pinned root itself, or carry a pinned root's key (a re-encoded copy).
    /// A root that merely shares a pinned root's name is refused here.
    private func requirePinned(_ presented: X509Certificate) throws(VerificationError) {
        if roots.contains(where: { $0.der == presented.der }) { return }
        if let key = presented.publicKey, rootKeys.contains(where: { $0?.sameKey(as: key) == true }) { return }
        throw VerificationError(.untrustedRoot, "x5c[2] is not a pinned root")
    }

    /// Returns the validity window of the chain OpenSSL built: its root is the pinned one from the
    /// store, whose dates may differ from x5c[2]'s when that is a re-encoded copy matched by key.
    private func runOpenSSL(leaf: X509Certificate, intermediate: X509Certificate) throws(VerificationError) -> ChainValidity {
        guard let ctx = X509_STORE_CTX_new() else { throw VerificationError(.invalidCertificateChain, "out of memory") }
        defer { X509_STORE_CTX_free(ctx); clearOpenSSLErrors() }
        guard let untrusted = iapgw_sk_X509_new_null() else { throw VerificationError(.invalidCertificateChain, "out of memory") }
        defer { iapgw_sk_X509_free(untrusted) }
        // Only the intermediate is offered as untrusted: the root must come from the pinned store.
        guard iapgw_sk_X509_push(untrusted, intermediate.x509) > 0 else {
            throw VerificationError(.invalidCertificateChain, "out of memory")
        }
        guard X509_STORE_CTX_init(ctx, store, leaf.x509, untrusted) == 1 else {
            throw VerificationError(.invalidCertificateChain, "cannot start chain verification")
        }
        let param = X509_STORE_CTX_get0_param(ctx)
        // Dates are checked by `requireValid` against the payload's date, once the signature has
        // proved the payload comes from this leaf.
        X509_VERIFY_PARAM_set_flags(param, UInt(X509_V_FLAG_NO_CHECK_TIME))
        X509_VERIFY_PARAM_set_depth(param, 1)  // leaf + one intermediate + root, nothing longer
        if X509_verify_cert(ctx) != 1 {
            let err = X509_STORE_CTX_get_error(ctx)
            let depth = X509_STORE_CTX_get_error_depth(ctx)
            let reason = String(cString: X509_verify_cert_error_string(Int(err)))
            throw VerificationError(Self.classify(err), "certificate at depth \(depth): \(reason)")
        }
        guard let built = X509_STORE_CTX_get0_chain(ctx), iapgw_sk_X509_num(built) == 3,
              X509_cmp(iapgw_sk_X509_value(built, 1), intermediate.x509) == 0,
              let builtRoot = iapgw_sk_X509_value(built, 2) else {
            throw VerificationError(.invalidCertificateChain, "OpenSSL built a different chain than x5c")
        }
        let rootNotBefore = X509Certificate.seconds(X509_get0_notBefore(builtRoot))
        let rootNotAfter = X509Certificate.seconds(X509_get0_notAfter(builtRoot))
        return ChainValidity(notBefore: max(leaf.notBefore, intermediate.notBefore, rootNotBefore),
                             notAfter: min(leaf.notAfter, intermediate.notAfter, rootNotAfter))
    }

    static func classify(_ err: Int32) -> VerificationError.Code {
        switch err {
        case X509_V_ERR_CERT_HAS_EXPIRED: .certificateExpired
        case X509_V_ERR_CERT_NOT_YET_VALID: .certificateNotYetValid
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
             X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
             X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE, X509_V_ERR_CERT_UNTRUSTED:
            .untrustedRoot
        default: .invalidCertificateChain
        }
    }
}
