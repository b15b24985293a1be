@testable import AppReceipts
import AppleTrust
import COpenSSL
import Foundation
import IAPCore
import TestPKI
import XCTest

/// The verified-signer cache of PKCS#7 receipts accepts nothing a verifier without it refuses: a
/// receipt that differs in its certificates, or is checked at a time outside its chain's validity,
/// or whose content was changed, is refused exactly as by a fresh verifier, after the cache holds
/// the good receipt's signer. Signed without authenticated attributes, as Apple signs (the shape
/// the cache serves).
final class ReceiptSignerCacheTests: XCTestCase {
    static let root = TestSigner(commonName: "Cache Test Root", isCA: true)
    static let wwdr = TestSigner(commonName: "Cache Test WWDR", issuer: root, isCA: true,
                                 markerOIDs: [TestSigner.wwdrMarkerOID], serial: 2)
    static let leaf = TestSigner(commonName: "Cache Test Receipt Signing", issuer: wwdr,
                                 markerOIDs: [TestSigner.receiptSigningMarkerOID], serial: 3)

    func payload() throws -> [UInt8] {
        try PKCS7SignedData.parse(StrictBase64.decode(AppleRealVectors.text(AppleRealVectors.receiptProduction))).content
    }

    func verifier() throws -> ReceiptVerifier { try ReceiptVerifier(rootCertificates: [Data(Self.root.certificateDER)]) }

    func good() throws -> [UInt8] { TestSigner.pkcs7(content: try payload(), signers: [Self.leaf], extraCertificates: [Self.wwdr], signedAttributes: false) }

    /// A verifier whose cache holds the good receipt's signer (and proves it: the second call hits).
    func warmed() throws -> ReceiptVerifier {
        let v = try verifier()
        let der = try good()
        try v.verify(der)
        try v.verify(der)
        XCTAssertEqual(v.appleTrust.signers.misses, 1)
        XCTAssertEqual(v.appleTrust.signers.hits, 1, "the same receipt again is verified from the cache")
        return v
    }

    func assertRefusedAsWhenCold(_ der: [UInt8], at time: Date? = nil, _ why: String,
                                 file: StaticString = #filePath, line: UInt = #line) throws {
        let cold = code { try self.verifier().verify(der, at: time) }
        XCTAssertNotNil(cold, "\(why): a fresh verifier must refuse it", file: file, line: line)
        let warm = try warmed()
        XCTAssertEqual(code { try warm.verify(der, at: time) }, cold, why, file: file, line: line)
    }

    func testSameLeafWithoutItsIntermediateIsRefusedAfterTheFullChainWasCached() throws {
        // The signer certificate and its signature are the cached ones; only the chain differs.
        let der = TestSigner.pkcs7(content: try payload(), signers: [Self.leaf], signedAttributes: false)
        try assertRefusedAsWhenCold(der, "leaf without the intermediate that chains it to the root")
    }

    func testAnotherSignerUnderTheSameIntermediateWithoutTheMarkerIsRefused() throws {
        let developer = TestSigner(commonName: "Cache Test Receipt Signing", issuer: Self.wwdr, serial: 3)
        let der = TestSigner.pkcs7(content: try payload(), signers: [developer], extraCertificates: [Self.wwdr], signedAttributes: false)
        try assertRefusedAsWhenCold(der, "same issuer and serial, another key, no receipt-signing marker")
    }

    func testTimesOutsideTheCachedChainsValidityAreRefused() throws {
        // The chain's window: the latest notBefore and the earliest notAfter of its certificates.
        let chain = try [Self.leaf, Self.wwdr, Self.root].map { try X509Certificate(der: Data($0.certificateDER)) }
        let notBefore = chain.map(\.notBefore).max()!, notAfter = chain.map(\.notAfter).min()!
        let der = try good()
        for second in [notAfter, notAfter + 1, notBefore - 1] {
            try assertRefusedAsWhenCold(der, at: Date(timeIntervalSince1970: Double(second)), "checked at \(second)")
        }
        // The first and the last second of validity are accepted both ways.
        for second in [notBefore, notAfter - 1] {
            let time = Date(timeIntervalSince1970: Double(second))
            XCTAssertNoThrow(try verifier().verify(der, at: time))
            XCTAssertNoThrow(try warmed().verify(der, at: time))
        }
    }

    func testApplesRealReceiptsAreVerifiedFromTheCacheTheSecondTime() throws {
        // Apple's shape (primitive content, only the chain's certificates) is the one cached.
        for name in [AppleRealVectors.receiptProduction, AppleRealVectors.receiptSandboxLegacy] {
            let v = try ReceiptVerifier(rootCertificates: [AppleRealVectors.data(AppleRealVectors.appleIncRoot)])
            let der = try StrictBase64.decode(AppleRealVectors.text(name))
            try v.verify(der)
            try v.verify(der)
            XCTAssertEqual(v.appleTrust.signers.misses, 1, name)
            XCTAssertEqual(v.appleTrust.signers.hits, 1, name)
        }
    }

    func testContentNestedDeeperThanOpenSSLParsesIsRefusedAsWhenCold() throws {
        // OpenSSL refuses constructed strings nested more than 5 deep (ASN1_MAX_STRING_NEST); our
        // DER reader allows more. Certificates and SignerInfo are unchanged, so the cache key is.
        let good = try good()
        XCTAssertNil(code { try self.verifier().verify(try Self.nestedContent(good, levels: 3)) },
                     "a shallow BER re-encoding is accepted by a fresh verifier")
        let deep = try Self.nestedContent(good, levels: 8)
        XCTAssertEqual(code { try self.verifier().verify(deep) }, .malformedReceipt)
        try assertRefusedAsWhenCold(deep, "content in constructed OCTET STRINGs nested 8 deep")
    }

    func testAReceiptCarryingACertificateOutsideItsChainIsNeverCached() throws {
        // OpenSSL takes the first candidate issuer valid at the verification time: a decoy with the
        // intermediate's subject, valid only from tomorrow, is passed over today and chosen (and
        // refused) the day after. A cached signer from today must not answer for that day.
        let decoy = Self.decoy(subjectOf: Self.wwdr, notBeforeFromNow: 86_400)
        let content = try payload()
        let der = withExtendedLifetime(decoy) {
            TestSigner.pkcs7(content: content, signers: [Self.leaf], extraX509: [decoy.certificate, Self.wwdr.certificate], signedAttributes: false)
        }
        let today = Date(), later = Date().addingTimeInterval(2 * 86_400)
        XCTAssertNil(code { try self.verifier().verify(der, at: today) }, "today: the real chain")
        let cold = code { try self.verifier().verify(der, at: later) }
        XCTAssertNotNil(cold, "later: OpenSSL builds leaf -> decoy and refuses")
        let warm = try verifier()
        try warm.verify(der, at: today)
        try warm.verify(der, at: today)
        XCTAssertEqual(code { try warm.verify(der, at: later) }, cold)
        XCTAssertEqual(warm.appleTrust.signers.hits, 0, "verified, but never from the cache")
    }

    func testChangedContentUnderTheCachedSignerIsAnInvalidSignature() throws {
        // One letter of the bundle id changed: the payload still parses, only the signature fails.
        var content = try payload()
        let bundle = try XCTUnwrap(content.firstRange(of: Array("org.getpure.pure-iphone".utf8)))
        content[bundle.upperBound - 1] ^= 0x01
        var der = try good()
        // Same certificates and SignerInfo, the content swapped for the changed one.
        let original = try payload()
        let at = try XCTUnwrap(der.firstRange(of: original))
        der.replaceSubrange(at, with: content)
        try assertRefusedAsWhenCold(der, "content changed after signing")
        XCTAssertEqual(code { try self.warmed().verify(der) }, .invalidSignature)
    }

    // MARK: - Inputs

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

    /// A self-signed RSA certificate with `signer`'s subject, valid from `notBeforeFromNow`
    /// seconds for a year: a candidate issuer OpenSSL tries for the certificates `signer` issued.
    static func decoy(subjectOf signer: TestSigner, notBeforeFromNow: Int) -> OwnedCertificate {
        let ctx = EVP_PKEY_CTX_new_id(NID_rsaEncryption, nil)!
        defer { EVP_PKEY_CTX_free(ctx) }
        precondition(EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, 2048) == 1)
        var pkey: OpaquePointer?
        precondition(EVP_PKEY_keygen(ctx, &pkey) == 1)
        defer { EVP_PKEY_free(pkey) }
        let x = X509_new()!
        X509_set_version(x, 2)
        ASN1_INTEGER_set(X509_get_serialNumber(x), 99)
        X509_gmtime_adj(X509_getm_notBefore(x), notBeforeFromNow)
        X509_gmtime_adj(X509_getm_notAfter(x), notBeforeFromNow + 86_400 * 365)
        X509_set_pubkey(x, pkey)
        X509_set_subject_name(x, X509_get_subject_name(signer.certificate))
        X509_set_issuer_name(x, X509_get_subject_name(signer.certificate))
        precondition(X509_sign(x, pkey, EVP_sha256()) > 0)
        return OwnedCertificate(x)
    }

    final class OwnedCertificate: @unchecked Sendable {
        let certificate: OpaquePointer
        init(_ certificate: OpaquePointer) { self.certificate = certificate }
        deinit { X509_free(certificate) }
    }
}
