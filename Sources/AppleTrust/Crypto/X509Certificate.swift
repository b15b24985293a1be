import COpenSSL
import Foundation
import IAPCore

/// An X.509 certificate parsed from DER. Owns its `X509`. Parsing is costly (≈ 0.3 ms), which is
/// why `SignedDataVerifier` caches what it learns from a verified chain instead of re-parsing.
///
/// The one X.509 wrapper: JWS x5c chains, receipt signers and the pinned roots of both.
public final class X509Certificate: @unchecked Sendable {
    package let x509: OpaquePointer
    /// The exact DER bytes this was parsed from.
    public let der: Data

    public init(der: Data) throws(VerificationError) {
        let parsed: OpaquePointer? = der.withUnsafeBytes { raw in
            var p = raw.bindMemory(to: UInt8.self).baseAddress
            guard let start = p else { return nil }
            guard let x = d2i_X509(nil, &p, raw.count) else { return nil }
            // Trailing bytes after the certificate: not the DER we were given, refuse.
            if p! - start != raw.count { X509_free(x); return nil }
            return x
        }
        clearOpenSSLErrors()
        guard let parsed else { throw VerificationError(.malformedCertificate, "not an X.509 DER certificate") }
        self.x509 = parsed
        self.der = der
    }

    /// Takes ownership of one reference (certificates the test PKI builds, chains OpenSSL built,
    /// a PKCS#7 signer's certificates after `X509_up_ref`).
    package init(owning x509: OpaquePointer) {
        self.x509 = x509
        var out: UnsafeMutablePointer<UInt8>? = nil
        let n = i2d_X509(x509, &out)
        self.der = n > 0 && out != nil ? Data(bytes: out!, count: Int(n)) : Data()
        CRYPTO_free(out, nil, 0)
    }

    deinit { X509_free(x509) }

    /// The OpenSSL handle, for the test PKI's OCSP responder. Borrowed, not owned.
    @_spi(TestPKI) public var x509Handle: OpaquePointer { x509 }

    /// SHA-256 of the DER, upper-case hex (as Apple and `openssl x509 -fingerprint` print it).
    public var sha256Fingerprint: String { SHA256Digest.hex(der) }

    public var publicKey: ECPublicKey? {
        guard let k = X509_get_pubkey(x509) else { clearOpenSSLErrors(); return nil }
        return ECPublicKey(owning: k)
    }

    /// Seconds since 1970 (a certificate's validity has second precision).
    public var notBefore: Int64 { Self.seconds(X509_get0_notBefore(x509)) }
    public var notAfter: Int64 { Self.seconds(X509_get0_notAfter(x509)) }

    public var subjectCommonName: String {
        guard let name = X509_get_subject_name(x509) else { return "" }
        var buf = [CChar](repeating: 0, count: 256)
        let n = X509_NAME_get_text_by_NID(name, NID_commonName, &buf, Int32(buf.count))
        return n > 0 ? String(decoding: buf[0..<Int(n)].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    }

    /// Whether the certificate carries an extension with this dotted OID (Apple's marker OIDs).
    public func hasExtension(oid: String) -> Bool {
        guard let obj = OBJ_txt2obj(oid, 1) else { clearOpenSSLErrors(); return false }
        defer { ASN1_OBJECT_free(obj) }
        return X509_get_ext_by_OBJ(x509, obj, -1) >= 0
    }

    /// The first OCSP responder URL of the AIA extension, if any.
    public var ocspResponderURL: String? {
        var buf = [CChar](repeating: 0, count: 512)
        let n = iapgw_X509_first_ocsp_url(x509, &buf, Int32(buf.count))
        clearOpenSSLErrors()
        guard n > 0 else { return nil }
        return String(decoding: buf[0..<Int(n)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func seconds(_ t: UnsafePointer<ASN1_TIME>?) -> Int64 {
        guard let t else { return 0 }
        var tm = tm()
        guard ASN1_TIME_to_tm(t, &tm) == 1 else { return 0 }
        return Int64(timegm(&tm))
    }
}
