import COpenSSL
import Foundation

/// A self-made RSA key and certificate, built with the OpenSSL C API so the receipt tests can
/// imitate Apple's chain shapes (and break them) without depending on the TestPKI target.
final class TestSigner: @unchecked Sendable {
    static let wwdrMarkerOID = "1.2.840.113635.100.6.2.1"
    static let receiptSigningMarkerOID = "1.2.840.113635.100.6.11.1"

    let key: OpaquePointer
    let certificate: OpaquePointer
    let certificateDER: [UInt8]

    /// - Parameters:
    ///   - issuer: nil for a self-signed certificate.
    ///   - markerOIDs: extensions added the way Apple adds its markers (non-critical, DER NULL).
    ///   - extendedKeyUsage: e.g. "codeSigning"; nil for none.
    init(bits: Int32 = 2048, commonName: String, issuer: TestSigner? = nil, isCA: Bool = false,
         markerOIDs: [String] = [], extendedKeyUsage: String? = nil, serial: Int = 1) {
        let ctx = EVP_PKEY_CTX_new_id(NID_rsaEncryption, nil)!
        defer { EVP_PKEY_CTX_free(ctx) }
        precondition(EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, bits) == 1)
        var pkey: OpaquePointer?
        precondition(EVP_PKEY_keygen(ctx, &pkey) == 1)
        key = pkey!
        let x = X509_new()!
        X509_set_version(x, 2)
        ASN1_INTEGER_set(X509_get_serialNumber(x), serial)
        // Valid for ten years either side of now: covers the real receipts' creation dates.
        X509_gmtime_adj(X509_getm_notBefore(x), -86_400 * 3650)
        X509_gmtime_adj(X509_getm_notAfter(x), 86_400 * 3650)
        X509_set_pubkey(x, key)
        let name = X509_get_subject_name(x)
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonName, -1, -1, 0)
        X509_set_issuer_name(x, issuer.map { X509_get_subject_name($0.certificate) } ?? name)

        var v3 = X509V3_CTX()
        X509V3_set_ctx(&v3, issuer?.certificate ?? x, x, nil, nil, 0)
        func add(_ nid: Int32, _ value: String) {
            let ext = X509V3_EXT_conf_nid(nil, &v3, nid, value)!
            precondition(X509_add_ext(x, ext, -1) == 1)
            X509_EXTENSION_free(ext)
        }
        // A self-signed end-entity certificate stays bare: it is pinned directly as its own root.
        if isCA || issuer != nil {
            add(NID_basic_constraints, isCA ? "critical,CA:TRUE" : "critical,CA:FALSE")
            add(NID_key_usage, isCA ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature")
        }
        if let extendedKeyUsage { add(NID_ext_key_usage, extendedKeyUsage) }
        for oid in markerOIDs {
            let object = OBJ_txt2obj(oid, 1)!
            defer { ASN1_OBJECT_free(object) }
            let null = ASN1_OCTET_STRING_new()!
            defer { ASN1_OCTET_STRING_free(null) }
            precondition(ASN1_OCTET_STRING_set(null, [0x05, 0x00], 2) == 1)
            let ext = X509_EXTENSION_create_by_OBJ(nil, object, 0, null)!
            precondition(X509_add_ext(x, ext, -1) == 1)
            X509_EXTENSION_free(ext)
        }
        precondition(X509_sign(x, issuer?.key ?? key, EVP_sha256()) > 0)
        certificate = x
        var out: UnsafeMutablePointer<UInt8>?
        let n = i2d_X509(x, &out)
        certificateDER = Array(UnsafeBufferPointer(start: out, count: Int(n)))
        CRYPTO_free(out, #file, #line)
    }

    deinit { X509_free(certificate); EVP_PKEY_free(key) }

    /// A raw RSA PKCS#1 v1.5 signature (iOS 6 transaction receipts).
    func sign(_ message: [UInt8], sha256: Bool) -> [UInt8] {
        let md = EVP_MD_CTX_new()!
        defer { EVP_MD_CTX_free(md) }
        precondition(EVP_DigestSignInit(md, nil, sha256 ? EVP_sha256() : EVP_sha1(), nil, key) == 1)
        var length = 0
        precondition(EVP_DigestSign(md, nil, &length, message, message.count) == 1)
        var signature = [UInt8](repeating: 0, count: length)
        precondition(EVP_DigestSign(md, &signature, &length, message, message.count) == 1)
        return Array(signature.prefix(length))
    }

    /// PKCS#7 SignedData (DER) over `content`, with one SignerInfo per signer, carrying every
    /// signer's certificate plus `extraCertificates`: the shape of an app receipt. OpenSSL adds
    /// authenticated attributes (content type, signing time, digest) unless `signedAttributes` is
    /// false; Apple's receipts carry none.
    static func pkcs7(content: [UInt8], signers: [TestSigner], extraCertificates: [TestSigner] = [],
                      signedAttributes: Bool = true, digest: OpaquePointer = EVP_sha256()) -> [UInt8] {
        withExtendedLifetime(extraCertificates) {
            pkcs7(content: content, signers: signers, extraX509: extraCertificates.map(\.certificate), signedAttributes: signedAttributes,
                  digest: digest)
        }
    }

    /// As above, the extra certificates (in this order, before the signers') given as OpenSSL
    /// objects the caller keeps alive: for certificates a `TestSigner` cannot make.
    static func pkcs7(content: [UInt8], signers: [TestSigner], extraX509: [OpaquePointer], signedAttributes: Bool,
                      digest: OpaquePointer = EVP_sha256()) -> [UInt8] {
        let certs = iapgw_sk_X509_new_null()!
        defer { iapgw_sk_X509_free(certs) }
        for extra in extraX509 { _ = iapgw_sk_X509_push(certs, extra) }
        let flags = Int32(PKCS7_BINARY | PKCS7_PARTIAL)
        let p7 = PKCS7_sign(nil, nil, certs, nil, flags)!
        defer { PKCS7_free(p7) }
        for signer in signers {
            let noAttributes = signedAttributes ? 0 : Int32(PKCS7_NOATTR)
            precondition(PKCS7_sign_add_signer(p7, signer.certificate, signer.key, digest, noAttributes) != nil)
        }
        let bio = content.withUnsafeBufferPointer { BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }!
        defer { BIO_free(bio) }
        precondition(PKCS7_final(p7, bio, Int32(PKCS7_BINARY)) == 1)
        var out: UnsafeMutablePointer<UInt8>?
        let n = i2d_PKCS7(p7, &out)
        precondition(n > 0)
        defer { CRYPTO_free(out, #file, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(n)))
    }
}
