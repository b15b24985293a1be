@testable import AppReceipts
import COpenSSL
import Foundation
import IAPCore
import TestPKI
import XCTest

/// A real production payload re-signed under a made-up, pinned root: chaining to a pinned root is
/// not enough, the chain must have Apple's receipt-signing shape.
final class AppleSignerChainTests: XCTestCase {
    static let root = TestSigner(commonName: "Made-up Root", isCA: true)
    static let wwdr = TestSigner(commonName: "Made-up WWDR", issuer: root, isCA: true,
                                 markerOIDs: [TestSigner.wwdrMarkerOID], serial: 2)
    static let plainIntermediate = TestSigner(commonName: "Made-up CA without WWDR marker", issuer: root, isCA: true, serial: 3)
    static let receiptLeaf = TestSigner(commonName: "Made-up Receipt Signing", issuer: wwdr,
                                        markerOIDs: [TestSigner.receiptSigningMarkerOID], serial: 4)

    func productionPayload() throws -> [UInt8] {
        try PKCS7SignedData.parse(StrictBase64.decode(AppleRealVectors.text(AppleRealVectors.receiptProduction))).content
    }

    func verifier() throws -> ReceiptVerifier { try ReceiptVerifier(rootCertificates: [Data(Self.root.certificateDER)]) }

    func testReceiptSignedWithAppleShapedChainUnderThePinnedRootVerifies() throws {
        let der = TestSigner.pkcs7(content: try productionPayload(), signers: [Self.receiptLeaf], extraCertificates: [Self.wwdr])
        XCTAssertEqual(try verifier().verify(der).bundleId, "org.getpure.pure-iphone")
    }

    func testIntermediateWithoutTheWWDRMarkerIsMissingAppleOID() throws {
        let leaf = TestSigner(commonName: "Receipt Signing under a plain CA", issuer: Self.plainIntermediate,
                              markerOIDs: [TestSigner.receiptSigningMarkerOID], serial: 5)
        let der = TestSigner.pkcs7(content: try productionPayload(), signers: [leaf], extraCertificates: [Self.plainIntermediate])
        XCTAssertEqual(code { try self.verifier().verify(der) }, .missingAppleOID)
    }

    /// What an ordinary developer holds: a code-signing certificate from WWDR.
    func testCodeSigningLeafWithoutTheReceiptMarkerIsMissingAppleOID() throws {
        let developer = TestSigner(commonName: "Apple Development: Mallory", issuer: Self.wwdr,
                                   extendedKeyUsage: "codeSigning", serial: 6)
        let der = TestSigner.pkcs7(content: try productionPayload(), signers: [developer], extraCertificates: [Self.wwdr])
        XCTAssertEqual(code { try self.verifier().verify(der) }, .missingAppleOID)
    }

    func testLeafDirectlyUnderTheRootIsAnInvalidChain() throws {
        let leaf = TestSigner(commonName: "Receipt Signing without intermediate", issuer: Self.root,
                              markerOIDs: [TestSigner.receiptSigningMarkerOID, TestSigner.wwdrMarkerOID], serial: 7)
        let der = TestSigner.pkcs7(content: try productionPayload(), signers: [leaf])
        XCTAssertEqual(code { try self.verifier().verify(der) }, .invalidCertificateChain)
    }

    func testChainOfFourIsAnInvalidChain() throws {
        let lowerWWDR = TestSigner(commonName: "Made-up WWDR below WWDR", issuer: Self.wwdr, isCA: true,
                                   markerOIDs: [TestSigner.wwdrMarkerOID], serial: 8)
        let leaf = TestSigner(commonName: "Receipt Signing four deep", issuer: lowerWWDR,
                              markerOIDs: [TestSigner.receiptSigningMarkerOID], serial: 9)
        let der = TestSigner.pkcs7(content: try productionPayload(), signers: [leaf], extraCertificates: [lowerWWDR, Self.wwdr])
        XCTAssertEqual(code { try self.verifier().verify(der) }, .invalidCertificateChain)
    }

    func testSecondSignerInfoIsRefusedEvenWhenBothSignersAreValid() throws {
        let second = TestSigner(commonName: "Made-up Receipt Signing 2", issuer: Self.wwdr,
                                markerOIDs: [TestSigner.receiptSigningMarkerOID], serial: 10)
        let der = TestSigner.pkcs7(content: try productionPayload(), signers: [Self.receiptLeaf, second], extraCertificates: [Self.wwdr])
        XCTAssertEqual(code { try self.verifier().verify(der) }, .invalidSignature)
    }

    /// One store per purpose: a pinned Xcode StoreKit key signing a payload that claims
    /// "Production" is checked against the App Store roots only, and refused.
    func testXcodeKeySigningAProductionReceiptIsRefusedEvenWhenXcodeIsAllowed() throws {
        let storeKitKey = TestSigner(commonName: "StoreKit")
        let der = TestSigner.pkcs7(content: try productionPayload(), signers: [storeKitKey])
        let verifier = try ReceiptVerifier(rootCertificates: [AppleRealVectors.data(AppleRealVectors.appleIncRoot)],
                                           xcodeRootCertificates: [Data(storeKitKey.certificateDER)], allowXcodeReceipts: true)
        XCTAssertEqual(code { try verifier.verify(der) }, .untrustedRoot)
    }

    func testSameCertificateAsAppStoreRootAndXcodeRootIsAConfigurationError() throws {
        let root = Data(Self.root.certificateDER)
        XCTAssertEqual(code { _ = try ReceiptVerifier(rootCertificates: [root], xcodeRootCertificates: [root], allowXcodeReceipts: true) },
                       .invalidConfiguration)
    }

    /// The SignerInfo's digest is the sender's choice: only Apple's SHA-256 and SHA-1 are taken,
    /// though OpenSSL verifies these signatures too and the chain is Apple's shape.
    func testSignerDigestOtherThanSHA256OrSHA1IsRefusedThoughTheSignatureVerifies() throws {
        for (name, digest) in [("MD5", EVP_md5()), ("SHA-512", EVP_sha512()), ("SHA3-256", EVP_sha3_256())] {
            let der = TestSigner.pkcs7(content: try productionPayload(), signers: [Self.receiptLeaf], extraCertificates: [Self.wwdr],
                                       digest: digest!)
            XCTAssertEqual(code { try self.verifier().verify(der) }, .invalidSignature, name)
        }
        let sha1 = TestSigner.pkcs7(content: try productionPayload(), signers: [Self.receiptLeaf], extraCertificates: [Self.wwdr],
                                    digest: EVP_sha1())
        XCTAssertEqual(try verifier().verify(sha1).bundleId, "org.getpure.pure-iphone")
    }

    /// The real Apple chains carry exactly the markers required (leaf 1.2.840.113635.100.6.11.1,
    /// WWDR G1/G5 1.2.840.113635.100.6.2.1), so all three real App Store receipts still verify.
    func testAllRealNonXcodeReceiptsStillVerifyUnderAppleIncRoot() throws {
        let apple = try ReceiptVerifier(rootCertificates: [AppleRealVectors.data(AppleRealVectors.appleIncRoot)])
        for name in [AppleRealVectors.receiptProduction, AppleRealVectors.receiptSandboxG5, AppleRealVectors.receiptSandboxLegacy] {
            XCTAssertNoThrow(try apple.verify(StrictBase64.decode(AppleRealVectors.text(name))), name)
        }
    }
}
