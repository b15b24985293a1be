import COpenSSL
import Foundation
import IAPCore

/// Apple's marker OIDs, defined once: JWS chains, receipt chains and the test PKI all use these.
public enum AppleMarkerOID {
    /// On Apple's WWDR intermediates (WWDR G1 and G5 in the real receipts and JWS vectors).
    public static let wwdrIntermediate = "1.2.840.113635.100.6.2.1"
    /// On Apple's signing leaves: App Store JWS signing and "Mac App Store and iTunes Store Receipt
    /// Signing" alike.
    public static let signingLeaf = "1.2.840.113635.100.6.11.1"
}

/// The window (seconds since 1970) in which every certificate of a verified chain is valid.
package struct ChainValidity: Sendable, Equatable {
    package var notBefore: Int64
    package var notAfter: Int64

    /// Where all of `chain` is valid at once (nowhere for an empty chain).
    package init(_ chain: [X509Certificate]) {
        notBefore = chain.map(\.notBefore).max() ?? .max
        notAfter = chain.map(\.notAfter).min() ?? .min
    }

    package func contains(_ second: Int64) -> Bool { notBefore <= second && second <= notAfter }
}

/// One requirement a certificate chain (leaf first, root last) must meet, in the style of
/// swift-certificates' `VerifierPolicy`: it passes, or refuses with its own stable code. A path's
/// chain rule is a list of these, checked in order.
package protocol ChainPolicy: Sendable {
    func check(_ chain: [X509Certificate]) throws(VerificationError)
}

extension Array where Element == any ChainPolicy {
    package func check(_ chain: [X509Certificate]) throws(VerificationError) {
        for policy in self { try policy.check(chain) }
    }
}

/// Exactly `count` certificates. JWS x5c and receipt chains refuse other lengths with different
/// codes (a malformed header vs. a chain of the wrong shape), so the code is the caller's.
package struct ExactChainLength: ChainPolicy {
    let count: Int
    let code: VerificationError.Code

    package init(_ count: Int, refusedAs code: VerificationError.Code) {
        self.count = count
        self.code = code
    }

    package func check(_ chain: [X509Certificate]) throws(VerificationError) {
        guard chain.count == count else {
            throw VerificationError(code, "the signing chain holds \(chain.count) certificates, not leaf, intermediate and root")
        }
    }
}

/// The chain ends in a pinned root: the pinned certificate itself, or a certificate carrying a
/// pinned root's key (a re-encoded copy of it). A root that merely shares a pinned root's name is
/// refused.
package struct PinnedRoot: ChainPolicy {
    let roots: [X509Certificate]
    private let rootKeys: [ECPublicKey?]

    init(_ roots: [X509Certificate]) {
        self.roots = roots
        self.rootKeys = roots.map(\.publicKey)
    }

    package func check(_ chain: [X509Certificate]) throws(VerificationError) {
        guard let presented = chain.last else { throw VerificationError(.untrustedRoot, "the chain is empty") }
        if roots.contains(where: { $0.der == presented.der }) { return }
        if let key = presented.publicKey, rootKeys.contains(where: { $0?.sameKey(as: key) == true }) { return }
        throw VerificationError(.untrustedRoot, "the chain does not end in a pinned root")
    }
}

/// Apple's marker OIDs on the intermediate (WWDR) and the leaf (Apple signing). Chaining to Apple
/// Inc. Root alone proves nothing: every Apple developer certificate does that too. Expects
/// leaf → intermediate → root (put `ExactChainLength(3, …)` before it).
package struct AppleMarkers: ChainPolicy {
    package init() {}

    package func check(_ chain: [X509Certificate]) throws(VerificationError) {
        guard chain.count >= 2 else { throw VerificationError(.invalidCertificateChain, "the chain has no intermediate") }
        guard chain[1].hasExtension(oid: AppleMarkerOID.wwdrIntermediate) else {
            throw VerificationError(.missingAppleOID, "the intermediate lacks Apple's WWDR marker OID \(AppleMarkerOID.wwdrIntermediate)")
        }
        guard chain[0].hasExtension(oid: AppleMarkerOID.signingLeaf) else {
            throw VerificationError(.missingAppleOID, "the leaf lacks Apple's signing marker OID \(AppleMarkerOID.signingLeaf)")
        }
    }
}

/// The JWS intermediate's key on a curve Apple issues WWDR intermediates on, by name: P-384 (G6)
/// or P-256. OpenSSL's chain building takes any key type it knows (secp256k1, brainpool, RSA of
/// any size); Apple's Swift library (swift-certificates) refuses curves it does not know, and
/// nothing but these ever signs Apple's ES256 leaves. The leaf's own curve is the signature's
/// business (`ECPublicKey.isNamedP256`); the root is pinned.
package struct AppleIntermediateKeyCurve: ChainPolicy {
    static let curves: Set<String> = ["secp384r1", "prime256v1"]

    package init() {}

    package func check(_ chain: [X509Certificate]) throws(VerificationError) {
        guard chain.count >= 2 else { throw VerificationError(.invalidCertificateChain, "the chain has no intermediate") }
        guard let curve = chain[1].publicKey?.namedCurve, Self.curves.contains(curve) else {
            throw VerificationError(.invalidCertificateChain, "the intermediate's key is not on P-384 or P-256 by name")
        }
    }
}

/// Every certificate valid at `second` (notBefore...notAfter, inclusive). JWS applies it after the
/// signature, at the payload's own date; a receipt's chain is checked at its time by OpenSSL
/// while it is built (`PinnedChainPolicy.build(…checkingTimeAt:)`), as PKCS7_verify needs anyway.
package struct ValidityTime: ChainPolicy {
    let second: Int64

    package init(_ second: Int64) { self.second = second }

    package func check(_ chain: [X509Certificate]) throws(VerificationError) { try check(ChainValidity(chain)) }

    /// The same rule on a window a cached chain kept.
    package func check(_ window: ChainValidity) throws(VerificationError) {
        guard window.contains(second) else {
            throw VerificationError(second < window.notBefore ? .certificateNotYetValid : .certificateExpired,
                                    "the signing chain is not valid at \(second)")
        }
    }
}

/// The one pinned-chain engine for JWS (x5c) and PKCS#7 (receipt signers) alike: the pinned roots,
/// an OpenSSL store holding only them (no default paths, no partial chains), and OpenSSL building
/// leaf → … → pinned root with every signature checked. What a path requires beyond that is a
/// list of `ChainPolicy` rules (pinned root, Apple markers, length, validity time); with online
/// checks, `OCSPRevocationCheck` (async) asks about the chain, and its answers must chain to the same store.
package final class PinnedChainPolicy: @unchecked Sendable {
    package let roots: [X509Certificate]
    package let pinnedRoot: PinnedRoot
    private let store: OpaquePointer

    /// With no roots every chain is refused UNTRUSTED_ROOT (fail closed, never "trust all").
    package init(rootCertificates: [Data]) throws(VerificationError) {
        var roots: [X509Certificate] = []
        for der in rootCertificates { roots.append(try X509Certificate(der: der)) }
        self.store = try Self.makeStore(roots, code: .invalidConfiguration)
        self.roots = roots
        self.pinnedRoot = PinnedRoot(roots)
    }

    deinit { X509_STORE_free(store) }

    /// OCSP responses must chain to the same pinned roots.
    var storeForOCSP: OpaquePointer { store }

    /// Whether any root of this policy is also a root of `other`.
    package func sharesRoot(with other: PinnedChainPolicy) -> Bool {
        roots.contains { mine in other.roots.contains { $0.der == mine.der } }
    }

    /// A fresh store of the pinned roots whose verify time is `second`, for OpenSSL calls that
    /// build the chain themselves (PKCS7_verify). Fresh per call: the time is per call, and a
    /// shared mutable store would race between threads. The caller frees it.
    package func makeStore(checkingTimeAt second: Int64) throws(VerificationError) -> OpaquePointer {
        let store = try Self.makeStore(roots, code: .invalidCertificateChain)
        X509_VERIFY_PARAM_set_time(X509_STORE_get0_param(store), time_t(second))
        return store
    }

    /// A root that failed to go in would leave a store that silently trusts less: fail closed.
    private static func makeStore(_ roots: [X509Certificate], code: VerificationError.Code) throws(VerificationError) -> OpaquePointer {
        guard let store = X509_STORE_new() else { throw VerificationError(code, "X509_STORE_new failed") }
        for root in roots where X509_STORE_add_cert(store, root.x509) != 1 {
            X509_STORE_free(store)
            clearOpenSSLErrors()
            throw VerificationError(code, "cannot pin root \(root.subjectCommonName)")
        }
        // Apple's receipt and JWS certificates carry no S/MIME or TLS usage; what they must be is
        // decided by the `ChainPolicy` rules, not by an OpenSSL purpose.
        X509_STORE_set_purpose(store, X509_PURPOSE_ANY)
        return store
    }

    /// Apple's JWS chain rule on the x5c header (leaf, intermediate, root), before the signature
    /// and before the payload is even decoded, so a token from any other PKI is UNTRUSTED_ROOT
    /// whatever its payload says: exactly three certificates, x5c[2] pinned, Apple's marker OIDs,
    /// the intermediate's key curve, then OpenSSL building leaf → intermediate → pinned root (time checks off). Returns the
    /// window in which the chain OpenSSL built is valid; `ValidityTime` applies it to the payload's
    /// date once the signature has proved the payload comes from this leaf.
    package func verifyJWSChain(_ x5c: [X509Certificate]) throws(VerificationError) -> ChainValidity {
        try [ExactChainLength(3, refusedAs: .invalidChainLength), pinnedRoot, AppleMarkers(), AppleIntermediateKeyCurve()].check(x5c)
        let built = try build(leaf: x5c[0], intermediates: [x5c[1]], maxIntermediates: 1, checkingTimeAt: nil)
        // The built root is the pinned one from the store, whose dates may differ from x5c[2]'s
        // when that is a re-encoded copy matched by key.
        guard built.count == 3, built[1].der == x5c[1].der else {
            throw VerificationError(.invalidCertificateChain, "OpenSSL built a different chain than x5c")
        }
        return ChainValidity(built)
    }

    /// Builds and checks the chain from `leaf` through `intermediates` (only these are offered as
    /// untrusted: the root must come from the pinned store) with every signature verified, and
    /// returns it leaf first, the pinned root last. `checkingTimeAt` nil turns OpenSSL's date
    /// checks off (the caller applies `ValidityTime`); `maxIntermediates` bounds the depth.
    package func build(leaf: X509Certificate, intermediates: [X509Certificate], maxIntermediates: Int?,
                       checkingTimeAt second: Int64?) throws(VerificationError) -> [X509Certificate] {
        guard let ctx = X509_STORE_CTX_new() else { throw VerificationError(.invalidCertificateChain, "out of memory") }
        defer { X509_STORE_CTX_free(ctx); clearOpenSSLErrors() }
        // The stack owns a reference to each certificate (up_ref, pop_free), so it never depends on
        // when Swift releases the wrappers.
        guard let untrusted = iapgw_sk_X509_new_null() else { throw VerificationError(.invalidCertificateChain, "out of memory") }
        defer { iapgw_sk_X509_pop_free(untrusted) }
        for certificate in intermediates {
            guard X509_up_ref(certificate.x509) == 1 else { throw VerificationError(.invalidCertificateChain, "out of memory") }
            guard iapgw_sk_X509_push(untrusted, certificate.x509) > 0 else {
                X509_free(certificate.x509)
                throw VerificationError(.invalidCertificateChain, "out of memory")
            }
        }
        let verified: Int32 = withExtendedLifetime(leaf) {
            guard X509_STORE_CTX_init(ctx, store, leaf.x509, untrusted) == 1 else { return -1 }
            let param = X509_STORE_CTX_get0_param(ctx)
            if let second {
                X509_VERIFY_PARAM_set_time(param, time_t(second))
            } else {
                X509_VERIFY_PARAM_set_flags(param, UInt(X509_V_FLAG_NO_CHECK_TIME))
            }
            if let maxIntermediates { X509_VERIFY_PARAM_set_depth(param, Int32(maxIntermediates)) }
            return X509_verify_cert(ctx)
        }
        guard verified != -1 else { throw VerificationError(.invalidCertificateChain, "cannot start chain verification") }
        guard verified == 1 else {
            let err = X509_STORE_CTX_get_error(ctx)
            let depth = X509_STORE_CTX_get_error_depth(ctx)
            let reason = String(cString: X509_verify_cert_error_string(Int(err)))
            throw VerificationError(Self.classify(err), "certificate at depth \(depth): \(reason)")
        }
        guard let chain = X509_STORE_CTX_get0_chain(ctx) else {
            throw VerificationError(.invalidCertificateChain, "verified chain is unavailable")
        }
        var built: [X509Certificate] = []
        for i in 0..<iapgw_sk_X509_num(chain) {
            guard let certificate = iapgw_sk_X509_value(chain, i), X509_up_ref(certificate) == 1 else {
                throw VerificationError(.invalidCertificateChain, "verified chain is unavailable")
            }
            built.append(X509Certificate(owning: certificate))
        }
        return built
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
