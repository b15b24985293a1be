@testable import AppReceipts
import AppleTrust
import COpenSSL
import Foundation
import IAPCore
import XCTest

/// Review of the verified-signer cache (s3-crypto): inputs a fresh verifier refuses but a warm one
/// accepts. Each test asserts the rule ("the cache accepts nothing a fresh verifier refuses"), so
/// each FAILS while the finding stands.
final class ReceiptSignerCacheReviewTests: XCTestCase {
    typealias Base = ReceiptSignerCacheTests

    /// ReceiptSignerCacheTests' helpers, without instantiating that test case.
    struct Helpers {
        func payload() throws -> [UInt8] { try PKCS7SignedData.parse(productionDER()).content }
        func verifier() throws -> ReceiptVerifier { try ReceiptVerifier(rootCertificates: [Data(Base.root.certificateDER)]) }
        func good() throws -> [UInt8] {
            TestSigner.pkcs7(content: try payload(), signers: [Base.leaf], extraCertificates: [Base.wwdr], signedAttributes: false)
        }
        func warmed() throws -> ReceiptVerifier {
            let v = try verifier()
            let der = try good()
            try v.verify(der)
            try v.verify(der)
            XCTAssertEqual(v.appleTrust.signers.hits, 1)
            return v
        }
    }

    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        var out = [tag]
        if content.count < 0x80 {
            out.append(UInt8(content.count))
        } else {
            var len: [UInt8] = []
            var n = content.count
            while n > 0 { len.insert(UInt8(n & 0xFF), at: 0); n >>= 8 }
            out.append(0x80 | UInt8(len.count))
            out += len
        }
        return out + content
    }

    static func whole(_ e: DERElement) -> [UInt8] { Array(e.bytes[e.offset..<e.contentRange.upperBound]) }

    /// `der` re-encoded with its eContent OCTET STRING wrapped in `levels` constructed OCTET
    /// STRINGs (BER). Certificates, digestAlgorithms and the SignerInfo are copied byte for byte,
    /// so the signer-cache key is unchanged; the content bytes are the same.
    static func nestedContent(_ der: [UInt8], levels: Int) throws -> [UInt8] {
        var top = try DERReader(der)
        let ci = try top.read(.sequence, "ContentInfo")
        var cic = try ci.children()
        let oid = try cic.read(.objectIdentifier, "contentType")
        let explicit = try cic.read(.context(0), "[0]")
        var w = try explicit.children()
        let sd = try w.read(.sequence, "SignedData")
        var s = try sd.children()
        var parts: [[UInt8]] = []
        while let e = try s.next() { parts.append(whole(e)) }
        XCTAssertEqual(parts.count, 5)
        let content = try PKCS7SignedData.parse(der).content
        var inner = tlv(0x04, content)
        for _ in 0..<levels { inner = tlv(0x24, inner) }
        let dataOID: [UInt8] = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x01]
        let encap = tlv(0x30, dataOID + tlv(0xA0, inner))
        let signedData = tlv(0x30, parts[0] + parts[1] + encap + parts[3] + parts[4])
        return tlv(0x30, whole(oid) + tlv(0xA0, signedData))
    }

    /// Finding 1: OpenSSL's BER decoder refuses constructed strings nested more than 5 deep
    /// (ASN1_MAX_STRING_NEST); our DERReader allows up to its depth limit. Cold: d2i_PKCS7 fails,
    /// MALFORMED_RECEIPT. Warm: the hit never calls OpenSSL's parser, the signature over our
    /// content verifies, accepted.
    func testDeeplyNestedContentIsRefusedWarmAsWhenCold() throws {
        let base = Helpers()
        let good = try base.good()
        // Sanity: a shallow BER re-encoding is accepted by a fresh verifier (OpenSSL decodes it).
        XCTAssertNil(code { try base.verifier().verify(try Self.nestedContent(good, levels: 3)) })
        let deep = try Self.nestedContent(good, levels: 8)
        let cold = code { try base.verifier().verify(deep) }
        XCTAssertEqual(cold, .malformedReceipt, "a fresh verifier refuses it (OpenSSL cannot parse the receipt)")
        let warm = try base.warmed()
        XCTAssertEqual(code { try warm.verify(deep) }, cold, "a warm verifier must refuse it too")
    }

    /// A self-signed RSA certificate whose subject is `name`'s subject, valid from `notBefore`
    /// (seconds from now) for a year: a candidate issuer OpenSSL will try for the leaf.
    static func decoy(named signer: TestSigner, notBeforeFromNow: Int) -> TestSignerLike {
        let ctx = EVP_PKEY_CTX_new_id(NID_rsaEncryption, nil)!
        defer { EVP_PKEY_CTX_free(ctx) }
        precondition(EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, 2048) == 1)
        var pkey: OpaquePointer?
        precondition(EVP_PKEY_keygen(ctx, &pkey) == 1)
        let x = X509_new()!
        X509_set_version(x, 2)
        ASN1_INTEGER_set(X509_get_serialNumber(x), 99)
        X509_gmtime_adj(X509_getm_notBefore(x), notBeforeFromNow)
        X509_gmtime_adj(X509_getm_notAfter(x), notBeforeFromNow + 86_400 * 365)
        X509_set_pubkey(x, pkey)
        X509_set_subject_name(x, X509_get_subject_name(signer.certificate))
        X509_set_issuer_name(x, X509_get_subject_name(signer.certificate))
        precondition(X509_sign(x, pkey, EVP_sha256()) > 0)
        EVP_PKEY_free(pkey)
        return TestSignerLike(certificate: x)
    }

    final class TestSignerLike: @unchecked Sendable {
        let certificate: OpaquePointer
        init(certificate: OpaquePointer) { self.certificate = certificate }
        deinit { X509_free(certificate) }
    }

    /// Finding 2: the chain OpenSSL builds depends on the verification time (find_issuer takes the
    /// first candidate issuer that is time-valid), but the cache key does not: the window cached is
    /// that of the chain built at the first (miss) time. A receipt carrying a decoy issuer (same
    /// subject as the WWDR intermediate, not yet valid at t1) before the real intermediate verifies
    /// at t1 through the real chain and is cached; at t2, when the decoy is valid, a fresh verifier
    /// builds leaf -> decoy and refuses, the warm one accepts from the cache.
    func testChainSelectionAtAnotherTimeIsRefusedWarmAsWhenCold() throws {
        let base = Helpers()
        let decoy = Self.decoy(named: Base.wwdr, notBeforeFromNow: 86_400)
        // Certificates in this order: decoy, real WWDR, then the signer (PKCS7_sign_add_signer appends it).
        let certs = iapgw_sk_X509_new_null()!
        defer { iapgw_sk_X509_free(certs) }
        _ = iapgw_sk_X509_push(certs, decoy.certificate)
        _ = iapgw_sk_X509_push(certs, Base.wwdr.certificate)
        let p7 = PKCS7_sign(nil, nil, certs, nil, Int32(PKCS7_BINARY | PKCS7_PARTIAL))!
        defer { PKCS7_free(p7) }
        precondition(PKCS7_sign_add_signer(p7, Base.leaf.certificate, Base.leaf.key, EVP_sha256(), Int32(PKCS7_NOATTR)) != nil)
        let content = try base.payload()
        let bio = content.withUnsafeBufferPointer { BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }!
        defer { BIO_free(bio) }
        precondition(PKCS7_final(p7, bio, Int32(PKCS7_BINARY)) == 1)
        var out: UnsafeMutablePointer<UInt8>?
        let n = i2d_PKCS7(p7, &out)
        precondition(n > 0)
        let der = Array(UnsafeBufferPointer(start: out, count: Int(n)))
        CRYPTO_free(out, #file, #line)

        let t1 = Date()
        let t2 = Date().addingTimeInterval(2 * 86_400)
        XCTAssertNil(code { try base.verifier().verify(der, at: t1) }, "fresh at t1: the real chain")
        let cold = code { try base.verifier().verify(der, at: t2) }
        XCTAssertNotNil(cold, "fresh at t2: OpenSSL builds leaf -> decoy and refuses")
        let warm = try base.verifier()
        try warm.verify(der, at: t1)
        XCTAssertEqual(warm.appleTrust.signers.misses, 1)
        XCTAssertEqual(code { try warm.verify(der, at: t2) }, cold, "warm at t2 must refuse as fresh does")
        XCTAssertEqual(warm.appleTrust.signers.hits, 1)
    }

    /// Not a finding (boundary agrees): the first second of validity is accepted both ways.
    func testNotBeforeBoundaryAgrees() throws {
        let base = Helpers()
        let chain = try [Base.leaf, Base.wwdr, Base.root].map { try X509Certificate(der: Data($0.certificateDER)) }
        let notBefore = chain.map(\.notBefore).max()!
        let first = Date(timeIntervalSince1970: Double(notBefore))
        let der = try base.good()
        XCTAssertNil(code { try base.verifier().verify(der, at: first) })
        XCTAssertNil(code { try base.warmed().verify(der, at: first) })
        let before = Date(timeIntervalSince1970: Double(notBefore) - 0.5)
        XCTAssertEqual(code { try base.verifier().verify(der, at: before) }, code { try base.warmed().verify(der, at: before) })
    }
}
