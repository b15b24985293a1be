@_spi(TestPKI) import AppleTrust
import COpenSSL
import Foundation
import IAPCore

/// Builds X.509 v3 certificates with OpenSSL for the test PKI.
enum CertificateBuilder {
    private static let serial = SerialCounter()

    static func build(subject: String, issuer: String, publicKeyOf subjectKey: ECPrivateKey, signer: ECPrivateKey,
                      validity: TestPKI.Validity, isCA: Bool, markerOID: String?,
                      ocspURL: String? = nil) throws(VerificationError) -> X509Certificate {
        guard let x = X509_new() else { throw failure("X509_new") }
        defer { X509_free(x); ERR_clear_error() }
        X509_set_version(x, 2)
        ASN1_INTEGER_set(X509_get_serialNumber(x), serial.next())
        ASN1_TIME_set(X509_getm_notBefore(x), time_t(validity.notBefore.timeIntervalSince1970))
        ASN1_TIME_set(X509_getm_notAfter(x), time_t(validity.notAfter.timeIntervalSince1970))
        guard setName(X509_get_subject_name(x), subject), setName(X509_get_issuer_name(x), issuer) else {
            throw failure("names")
        }
        guard X509_set_pubkey(x, subjectKey.evpPKey) == 1 else { throw failure("X509_set_pubkey") }
        try addExtension(x, nid: NID_basic_constraints, value: isCA ? "critical,CA:TRUE" : "critical,CA:FALSE")
        try addExtension(x, nid: NID_key_usage, value: isCA ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature")
        if let markerOID { try addMarker(x, oid: markerOID) }
        if let ocspURL { try addExtension(x, nid: NID_info_access, value: "OCSP;URI:\(ocspURL)") }
        let digest = EVP_PKEY_get_bits(signer.evpPKey) > 256 ? EVP_sha384() : EVP_sha256()
        guard X509_sign(x, signer.evpPKey, digest) > 0 else { throw failure("X509_sign") }
        var out: UnsafeMutablePointer<UInt8>? = nil
        let n = i2d_X509(x, &out)
        guard n > 0, let out else { throw failure("i2d_X509") }
        let der = Data(bytes: out, count: Int(n))
        CRYPTO_free(out, nil, 0)
        return try X509Certificate(der: der)
    }

    private static func setName(_ name: OpaquePointer?, _ cn: String) -> Bool {
        guard let name else { return false }
        let bytes = Array(cn.utf8)
        return X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, "IAPGateway Test", -1, -1, 0) == 1
            && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, bytes, Int32(bytes.count), -1, 0) == 1
    }

    private static func addExtension(_ x: OpaquePointer, nid: Int32, value: String) throws(VerificationError) {
        guard let ext = X509V3_EXT_conf_nid(nil, nil, nid, value) else { throw failure("extension \(nid)") }
        defer { X509_EXTENSION_free(ext) }
        guard X509_add_ext(x, ext, -1) == 1 else { throw failure("X509_add_ext") }
    }

    /// Apple's marker extensions hold an ASN.1 NULL and are not critical.
    private static func addMarker(_ x: OpaquePointer, oid: String) throws(VerificationError) {
        guard let obj = OBJ_txt2obj(oid, 1), let value = ASN1_OCTET_STRING_new() else { throw failure("marker OID") }
        defer { ASN1_OBJECT_free(obj); ASN1_OCTET_STRING_free(value) }
        let null: [UInt8] = [0x05, 0x00]
        guard ASN1_OCTET_STRING_set(value, null, 2) == 1,
              let ext = X509_EXTENSION_create_by_OBJ(nil, obj, 0, value) else { throw failure("marker extension") }
        defer { X509_EXTENSION_free(ext) }
        guard X509_add_ext(x, ext, -1) == 1 else { throw failure("X509_add_ext") }
    }

    private static func failure(_ step: String) -> VerificationError {
        VerificationError(.invalidConfiguration, "test PKI: \(step) failed")
    }
}

import Synchronization
final class SerialCounter: Sendable {
    private let value = Atomic<Int>(1)
    func next() -> Int { value.add(1, ordering: .relaxed).newValue }
}
