@testable import AppReceipts
import Foundation
import IAPCore
import TestPKI
import XCTest

/// Real receipts altered the ways an attacker or a broken client would alter them.
final class TamperedReceiptTests: XCTestCase {
    let reader = { try! AppReceiptReader(roots: [try! AppleRealVectors.data(AppleRealVectors.appleIncRoot)]) }()

    func testFlippedBundleIdByteIsAnInvalidSignature() throws {
        let der = try tamperedBundleIdDER()
        XCTAssertEqual(code { _ = try self.reader.read(der: der) }, .invalidSignature)
    }

    func testVerifiedReadOfTamperedReceiptGivesNoIdsButUnverifiedReadFlagsThem() throws {
        let der = try tamperedBundleIdDER()
        XCTAssertThrowsError(try reader.read(der: der, mode: .verified))
        let unverified = try reader.read(der: der, mode: .unverified)
        XCTAssertEqual(unverified.receipt.bundleId, "xrg.getpure.pure-iphone")
        XCTAssertFalse(unverified.signatureVerified)
        XCTAssertEqual(unverified.signatureError?.code, .invalidSignature)
        XCTAssertTrue(unverified.transactionIds.contains("340001196262039"))
        // A result marked verified-mode but unsigned never hands out ids.
        let hypothetical = VerifiedAppReceiptProbe.idsIfReadVerified(unverified)
        XCTAssertEqual(hypothetical, [])
    }

    func testFlippedSignatureByteIsAnInvalidSignature() throws {
        var der = try productionDER()
        der[der.count - 10] ^= 0x01   // inside the RSA signature at the end of SignerInfo
        XCTAssertEqual(code { _ = try self.reader.read(der: der) }, .invalidSignature)
    }

    func testTruncatedReceiptIsMalformed() throws {
        let der = try productionDER()
        for cut in [1, 100, der.count / 2, der.count - 1] {
            XCTAssertEqual(code { _ = try self.reader.read(der: Array(der.prefix(cut))) }, .malformedReceipt, "cut at \(cut)")
        }
    }

    func testTrailingBytesAfterTheReceiptAreRefused() throws {
        XCTAssertEqual(code { _ = try self.reader.read(der: try productionDER() + [0x00]) }, .malformedReceipt)
    }

    func testLengthOverflowInTheOuterSequenceIsMalformed() throws {
        var der = try productionDER()
        der[1] = 0x84; der[2] = 0x7F; der[3] = 0xFF
        XCTAssertEqual(code { _ = try self.reader.read(der: der) }, .malformedReceipt)
    }

    func testDeeplyNestedIndefiniteLengthsAreMalformed() {
        let deep = [UInt8]((0..<2000).flatMap { _ in [0x30, 0x80] }) + [UInt8](repeating: 0, count: 4000)
        XCTAssertEqual(code { _ = try self.reader.read(der: deep) }, .malformedReceipt)
    }

    func testGarbageAndOversizedBase64AreRefused() throws {
        XCTAssertEqual(code { _ = try self.reader.read(base64: "not base64!") }, .malformedBase64)
        XCTAssertEqual(code { _ = try self.reader.read(base64: "") }, .malformedBase64)
        XCTAssertEqual(code { _ = try self.reader.read(base64: "MIIB") }, .malformedReceipt)
        let huge = String(repeating: "A", count: (1 << 20) + 4)
        XCTAssertEqual(code { _ = try self.reader.read(base64: huge) }, .inputTooLarge)
    }

    /// The only signature-free whole-receipt parser says so in its name.
    func testParseUnverifiedReadsATamperedReceiptWithoutCheckingItsSignature() throws {
        let receipt = try AppReceipt.parseUnverified(pkcs7: try tamperedBundleIdDER())
        XCTAssertEqual(receipt.bundleId, "xrg.getpure.pure-iphone")
        XCTAssertEqual(code { _ = try AppReceipt.parseUnverified(pkcs7: [0x30, 0x00]) }, .malformedReceipt)
    }

    func testNonDERPayloadInsideAValidEnvelopeIsMalformed() throws {
        XCTAssertEqual(code { _ = try AppReceipt.parsePayload([0x31, 0x03, 0x02, 0x01, 0x00]) }, .malformedReceipt)
    }
}

/// What `transactionIds` would give had the same unsigned receipt been read in `.verified` mode.
enum VerifiedAppReceiptProbe {
    static func idsIfReadVerified(_ r: VerifiedAppReceipt) -> [String] {
        VerifiedAppReceipt(receipt: r.receipt, mode: .verified, signatureVerified: r.signatureVerified,
                           signatureError: r.signatureError).transactionIds
    }
}
