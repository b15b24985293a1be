@_spi(TestPKI) import AppleTrust
import AppleTrust
import COpenSSL
import Foundation
import IAPCore

/// A private PKI shaped like Apple's (root → WWDR-like intermediate → leaf, with Apple's marker
/// OIDs), for tests, the App Store simulator and benchmarks. Never trusted by a production policy:
/// a verifier trusts it only when its root is pinned explicitly.
public enum TestPKI {
    /// A certificate and the private key it certifies.
    public struct Identity: Sendable {
        public let certificate: X509Certificate
        public let key: ECPrivateKey
        public var der: Data { certificate.der }
    }

    /// Validity in seconds since 1970 (certificates have second precision).
    public struct Validity: Sendable {
        public var notBefore: Date
        public var notAfter: Date
        public init(notBefore: Date, notAfter: Date) { self.notBefore = notBefore; self.notAfter = notAfter }
        /// From `days` ago until `days` from `now`.
        public static func around(_ now: Date = Date(), days: Double) -> Validity {
            Validity(notBefore: now.addingTimeInterval(-days * 86_400), notAfter: now.addingTimeInterval(days * 86_400))
        }
    }

    public static let intermediateOID = AppleMarkerOID.wwdrIntermediate
    public static let leafOID = AppleMarkerOID.signingLeaf

    /// Root and intermediate; issues leaves.
    public struct CertificateAuthority: Sendable {
        public let root: Identity
        public let intermediate: Identity

        /// - Parameters:
        ///   - rootName: the root's CN (give two CAs the same name to get a same-name, other-key root).
        ///   - intermediateHasAppleOID: false for the "missing WWDR OID" broken variant.
        ///   - intermediateKey: another key for the intermediate (`TestPKI.ecKey(curve:…)`: a wrong curve).
        public static func make(rootName: String = "IAPGateway Test Root CA - G3",
                                rootCurve: ECPrivateKey.Curve = .p384,
                                validity: Validity = .around(days: 3650),
                                intermediateValidity: Validity? = nil,
                                intermediateHasAppleOID: Bool = true,
                                intermediateOCSPURL: String? = nil,
                                intermediateKey: ECPrivateKey? = nil) throws(VerificationError) -> CertificateAuthority {
            let rootKey = try ECPrivateKey.generate(rootCurve)
            let root = try CertificateBuilder.build(
                subject: rootName, issuer: rootName, publicKeyOf: rootKey, signer: rootKey,
                validity: validity, isCA: true, markerOID: nil)
            let intermediateKey = if let intermediateKey { intermediateKey } else { try ECPrivateKey.generate(rootCurve) }
            let intermediate = try CertificateBuilder.build(
                subject: "IAPGateway Test Worldwide Developer Relations CA - G6", issuer: rootName,
                publicKeyOf: intermediateKey, signer: rootKey, validity: intermediateValidity ?? validity,
                isCA: true, markerOID: intermediateHasAppleOID ? TestPKI.intermediateOID : nil, ocspURL: intermediateOCSPURL)
            return CertificateAuthority(root: Identity(certificate: root, key: rootKey),
                                        intermediate: Identity(certificate: intermediate, key: intermediateKey))
        }

        /// A P-256 signing leaf, as Apple's "Prod ECC Mac App Store and iTunes Store Receipt Signing".
        /// `key` certifies another key instead (`TestPKI.ecKey(curve:…)`: a leaf on a wrong curve).
        public func issueLeaf(validity: Validity = .around(days: 365), hasAppleOID: Bool = true,
                              commonName: String = "IAPGateway Test StoreKit Signing",
                              ocspURL: String? = nil, key: ECPrivateKey? = nil) throws(VerificationError) -> Identity {
            let key = if let key { key } else { try ECPrivateKey.generate(.p256) }
            let cert = try CertificateBuilder.build(
                subject: commonName, issuer: intermediate.certificate.subjectCommonName, publicKeyOf: key,
                signer: intermediate.key, validity: validity, isCA: false, markerOID: hasAppleOID ? TestPKI.leafOID : nil,
                ocspURL: ocspURL)
            return Identity(certificate: cert, key: key)
        }

        /// A signer for `leaf` with the usual x5c [leaf, intermediate, root].
        public func signer(leaf: Identity) -> JWSSigner {
            JWSSigner(x5c: [leaf.der, intermediate.der, root.der], key: leaf.key)
        }
    }

    /// Signs compact JWS the way Apple does (ES256, x5c in the header).
    public struct JWSSigner: Sendable {
        public var x5c: [Data]
        public let key: ECPrivateKey

        public init(x5c: [Data], key: ECPrivateKey) {
            self.x5c = x5c
            self.key = key
        }

        /// `headerOverrides` replace header fields (a `.null` value removes the field): adversarial
        /// tests use it for `alg: none`, wrong x5c, and so on.
        public func sign(_ payload: JSONValue, headerOverrides: [String: JSONValue] = [:]) throws(VerificationError) -> String {
            try TestPKI.signJWS(payloadText: payload.jsonText, chain: x5c, key: key, headerOverrides: headerOverrides)
        }
    }

    public static func signJWS(payload: JSONValue, chain: [Data], key: ECPrivateKey,
                               headerOverrides: [String: JSONValue] = [:]) throws(VerificationError) -> String {
        try signJWS(payloadText: payload.jsonText, chain: chain, key: key, headerOverrides: headerOverrides)
    }

    /// Signs payload text as given (so tests can sign JSON that `JSONValue` cannot represent, such
    /// as duplicate keys).
    public static func signJWS(payloadText: String, chain: [Data], key: ECPrivateKey,
                               headerOverrides: [String: JSONValue] = [:]) throws(VerificationError) -> String {
        var header: [String: JSONValue] = [
            "alg": .string("ES256"),
            "x5c": .array(chain.map { .string(Base64URL.encodeStandardPadded($0)) }),
        ]
        for (k, v) in headerOverrides {
            if v == .null { header.removeValue(forKey: k) } else { header[k] = v }
        }
        let input = Base64URL.encode(Array(JSONValue.object(header).jsonText.utf8)) + "." + Base64URL.encode(Array(payloadText.utf8))
        return input + "." + Base64URL.encode(try key.signES256(Array(input.utf8)))
    }
}

extension TestPKI.CertificateAuthority {
    /// A second encoding of the root: same name and key, other validity. A verifier pinning the
    /// original accepts it as x5c[2] by key; tests use it to prove the pinned root's dates rule.
    public func reissuedRoot(validity: TestPKI.Validity) throws(VerificationError) -> X509Certificate {
        let name = root.certificate.subjectCommonName
        return try CertificateBuilder.build(subject: name, issuer: name, publicKeyOf: root.key, signer: root.key,
                                            validity: validity, isCA: true, markerOID: nil)
    }
}

extension TestPKI {
    /// `key` as a password-protected PEM (AES-256-CBC): PKCS#8 (`ENCRYPTED PRIVATE KEY`) or, with
    /// `traditional`, OpenSSL's legacy `EC PRIVATE KEY` with `Proc-Type: 4,ENCRYPTED`. For tests
    /// proving such keys are refused rather than prompting for a password.
    public static func encryptedPEM(_ key: ECPrivateKey, password: String, traditional: Bool = false) throws(VerificationError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw VerificationError(.invalidConfiguration, "test PKI: BIO_new failed") }
        defer { BIO_free(bio); ERR_clear_error() }
        let pass = Array(password.utf8)
        let written = pass.withUnsafeBufferPointer { p in
            let raw = UnsafeMutablePointer(mutating: p.baseAddress)
            return traditional
                ? PEM_write_bio_PrivateKey_traditional(bio, key.evpPKey, EVP_aes_256_cbc(), raw, Int32(p.count), nil, nil)
                : PEM_write_bio_PKCS8PrivateKey(bio, key.evpPKey, EVP_aes_256_cbc(), raw.map { UnsafeMutableRawPointer($0).assumingMemoryBound(to: CChar.self) }, Int32(p.count), nil, nil)
        }
        guard written == 1 else { throw VerificationError(.invalidConfiguration, "test PKI: encrypted PEM export failed") }
        var ptr: UnsafeMutablePointer<CChar>? = nil
        let n = iapgw_BIO_get_mem_data(bio, &ptr)
        guard let ptr, n > 0 else { throw VerificationError(.invalidConfiguration, "test PKI: empty PEM") }
        return String(decoding: UnsafeRawBufferPointer(start: ptr, count: Int(n)), as: UTF8.self)
    }
}

extension TestPKI {
    /// A fresh EC key on any curve OpenSSL knows by `curve` name (secp256k1, brainpoolP256r1, ...),
    /// its parameters encoded explicitly rather than by name with `explicitParameters`: keys
    /// Apple never uses, for tests proving they are refused wherever a P-256 key is required.
    public static func ecKey(curve: String, explicitParameters: Bool = false) throws(VerificationError) -> ECPrivateKey {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw VerificationError(.invalidConfiguration, "test PKI: EVP_PKEY_CTX_new_from_name failed")
        }
        defer { EVP_PKEY_CTX_free(ctx); ERR_clear_error() }
        // OSSL_PARAM keeps the pointers, so they must outlive the calls: C copies, freed after.
        let texts: [String] = [OSSL_PKEY_PARAM_GROUP_NAME, curve, OSSL_PKEY_PARAM_EC_ENCODING,
                               explicitParameters ? OSSL_PKEY_EC_ENCODING_EXPLICIT : OSSL_PKEY_EC_ENCODING_GROUP]
        let strings = texts.map { strdup($0)! }
        defer { strings.forEach { free($0) } }
        var params = [OSSL_PARAM_construct_utf8_string(strings[0], strings[1], 0),
                      OSSL_PARAM_construct_utf8_string(strings[2], strings[3], 0), OSSL_PARAM_construct_end()]
        var key: OpaquePointer? = nil
        let generated = EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_CTX_set_params(ctx, &params) == 1 && EVP_PKEY_generate(ctx, &key) == 1
        guard generated, let key else { throw VerificationError(.invalidConfiguration, "test PKI: no \(curve) key") }
        return ECPrivateKey(owning: key)
    }
}
