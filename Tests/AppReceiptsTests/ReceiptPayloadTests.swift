import AppReceipts
import Foundation
import IAPCore
import TestPKI
import XCTest

func attribute(_ type: Int, _ value: [UInt8]) -> [UInt8] {
    let t: [UInt8] = type < 0x80 ? [UInt8(type)] : [UInt8(type >> 8), UInt8(type & 0xFF)]
    return tlv(0x30, tlv(0x02, t) + tlv(0x02, [1]) + tlv(0x04, value))
}

final class ReceiptPayloadTests: XCTestCase {
    func testTypedFieldsAndUnknownAttributesAreBothKept() throws {
        let inApp = tlv(0x31, attribute(1702, tlv(0x0C, Array("p".utf8))) + attribute(1799, [0xDE, 0xAD]))
        let payload = tlv(0x31, attribute(2, tlv(0x0C, Array("com.example".utf8))) + attribute(17, inApp)
                          + attribute(99, tlv(0x02, [7])) + attribute(12, tlv(0x16, Array("2024-02-23T17:27:16Z".utf8))))
        let r = try AppReceipt.parsePayload(payload)
        XCTAssertEqual(r.bundleId, "com.example")
        XCTAssertEqual(r.creationDate, 1_708_709_236_000)
        XCTAssertEqual(r.attributes.first { $0.type == 99 }?.value, .integer(7))
        XCTAssertEqual(r.inAppPurchases.first?.productId, "p")
        XCTAssertEqual(r.inAppPurchases.first?.attributes.last?.value, .bytes([0xDE, 0xAD]))
    }

    func testDuplicatedDocumentedAttributeIsRefused() {
        let payload = tlv(0x31, attribute(2, tlv(0x0C, Array("a".utf8))) + attribute(2, tlv(0x0C, Array("b".utf8))))
        XCTAssertEqual(code { _ = try AppReceipt.parsePayload(payload) }, .malformedReceipt)
        let inApp = tlv(0x31, attribute(1703, tlv(0x0C, Array("1".utf8))) + attribute(1703, tlv(0x0C, Array("2".utf8))))
        XCTAssertEqual(code { _ = try AppReceipt.parsePayload(tlv(0x31, attribute(17, inApp))) }, .malformedReceipt)
    }

    func testDocumentedAttributeOfTheWrongTypeIsRefused() {
        XCTAssertEqual(code { _ = try AppReceipt.parsePayload(tlv(0x31, attribute(2, tlv(0x02, [1])))) }, .malformedReceipt)
        XCTAssertEqual(code { _ = try AppReceipt.parsePayload(tlv(0x31, attribute(12, tlv(0x16, Array("yesterday".utf8))))) }, .malformedReceipt)
        XCTAssertEqual(code { _ = try AppReceipt.parsePayload(tlv(0x31, attribute(17, tlv(0x02, [1])))) }, .malformedReceipt)
    }

    func testDatesInAppleAndXcodeFormsAreReadAsUTCMilliseconds() {
        XCTAssertEqual(RFC3339.milliseconds("1970-01-01T00:00:00Z"), 0)
        XCTAssertEqual(RFC3339.milliseconds("2020-07-22T18:33:15+0100"), RFC3339.milliseconds("2020-07-22T17:33:15Z"))
        XCTAssertEqual(RFC3339.milliseconds("2020-07-22T18:33:15-01:30"), RFC3339.milliseconds("2020-07-22T20:03:15Z"))
        XCTAssertEqual(RFC3339.milliseconds("2024-02-29T00:00:00.25Z"), 1_709_164_800_250)
        for bad in ["2023-02-29T00:00:00Z", "2024-02-23 17:27:16Z", "2024-02-23T17:27:16", "2024-02-23T24:00:00Z", "2024-02-23T17:27:16Zjunk"] {
            XCTAssertNil(RFC3339.milliseconds(bad), bad)
        }
    }

    /// An explicit Xcode policy with the StoreKit test certificate pinned is the one way an Xcode
    /// receipt verifies.
    func testXcodeReceiptVerifiesOnlyWithAnExplicitPolicyAndItsOwnRootPinned() throws {
        let der = try StrictBase64.decode(AppleRealVectors.text(AppleRealVectors.receiptXcodeWithPurchases))
        let storeKitCert = try firstEmbeddedCertificate(der)
        let strict = try ReceiptVerifier(rootCertificates: [], xcodeRootCertificates: [Data(storeKitCert)])
        XCTAssertEqual(code { try strict.verify(der) }, .notAppStoreReceipt)
        // Pinned as an App Store root instead of an Xcode root, it vouches for nothing of type Xcode.
        let misplaced = try ReceiptVerifier(rootCertificates: [Data(storeKitCert)], allowXcodeReceipts: true)
        XCTAssertEqual(code { try misplaced.verify(der) }, .untrustedRoot)
        let xcodePolicy = try ReceiptVerifier(rootCertificates: [], xcodeRootCertificates: [Data(storeKitCert)], allowXcodeReceipts: true)
        let receipt = try xcodePolicy.verify(der)
        XCTAssertEqual(receipt.receiptType, "Xcode")
        XCTAssertFalse(receipt.inAppPurchases.isEmpty)
    }

    /// The first certificate of SignedData.certificates, cut out with our own reader.
    func firstEmbeddedCertificate(_ der: [UInt8]) throws -> [UInt8] {
        var top = try DERReader(der)
        var ci = try top.read(.sequence, "ContentInfo").children()
        _ = try ci.next()
        var wrapper = try ci.read(.context(0), "[0]").children()
        var sd = try wrapper.read(.sequence, "SignedData").children()
        _ = try sd.next(); _ = try sd.next(); _ = try sd.next()
        var certs = try sd.read(.context(0), "certificates").children()
        let start = certs.position
        _ = try certs.next()
        return Array(der[start..<certs.position])
    }
}
