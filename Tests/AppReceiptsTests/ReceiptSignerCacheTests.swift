@testable import AppReceipts
import AppleTrust
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
        // The last second of validity is accepted both ways.
        let last = Date(timeIntervalSince1970: Double(notAfter - 1))
        XCTAssertNoThrow(try verifier().verify(der, at: last))
        XCTAssertNoThrow(try warmed().verify(der, at: last))
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
}
