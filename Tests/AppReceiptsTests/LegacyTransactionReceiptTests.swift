import AppReceipts
import Foundation
import IAPCore
import XCTest

final class LegacyTransactionReceiptTests: XCTestCase {
    static let signer3 = TestSigner(bits: 2048, commonName: "Test iTunes Store Receipt Signing")
    static let signer2 = TestSigner(bits: 1024, commonName: "Test iTunes Store Receipt Signing v2")

    let purchaseInfo = """
    {
    \t"original-purchase-date-pst" = "2017-03-21 13:25:40 America/Los_Angeles";
    \t"purchase-date-ms" = "1490127939469";
    \t"original-transaction-id" = "1000000283718133";
    \t"expires-date" = "1490128239469";
    \t"transaction-id" = "1000000283718134";
    \t"original-purchase-date-ms" = "1490127940017";
    \t"web-order-line-item-id" = "1000000034637027";
    \t"bvrs" = "1.2.0";
    \t"item-id" = "1215609502";
    \t"product-id" = "com.example.monthly";
    \t"quantity" = "1";
    \t"bid" = "com.example.app";
    \t"unique-identifier" = "d2c92e2ce1f259f623d66e6df364b4ed6da1b2cd";
    }
    """

    func transactionReceipt(version: UInt8, signer: TestSigner, signedInfo: String? = nil, sentInfo: String? = nil) -> String {
        let signedBytes = Array((signedInfo ?? purchaseInfo).utf8)
        let signature = signer.sign([version] + signedBytes, sha256: version == 3)
        let n = signer.certificateDER.count
        let blob = [version] + signature + [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + signer.certificateDER
        let plist = """
        {
        \t"signature" = "\(Data(blob).base64EncodedString())";
        \t"purchase-info" = "\(Data((sentInfo ?? signedInfo ?? purchaseInfo).utf8).base64EncodedString())";
        \t"environment" = "Sandbox";
        \t"pod" = "100";
        \t"signing-status" = "0";
        }
        """
        return Data(plist.utf8).base64EncodedString()
    }

    func verifier(_ signer: TestSigner) throws -> LegacyTransactionReceiptVerifier {
        try LegacyTransactionReceiptVerifier(rootCertificates: [Data(signer.certificateDER)])
    }

    func testVersion3ReceiptParsesIntoAnInAppRecordAndVerifies() throws {
        let receipt = try LegacyTransactionReceipt.parse(base64: transactionReceipt(version: 3, signer: Self.signer3))
        XCTAssertEqual(receipt.unsignedEnvironment, "Sandbox")
        XCTAssertEqual(receipt.bundleId, "com.example.app")
        XCTAssertEqual(receipt.bundleVersion, "1.2.0")
        XCTAssertEqual(receipt.purchase.transactionId, "1000000283718134")
        XCTAssertEqual(receipt.purchase.originalTransactionId, "1000000283718133")
        XCTAssertEqual(receipt.purchase.productId, "com.example.monthly")
        XCTAssertEqual(receipt.purchase.quantity, 1)
        XCTAssertEqual(receipt.purchase.purchaseDate, 1490127939469)
        XCTAssertEqual(receipt.purchase.expiresDate, 1490128239469)
        XCTAssertEqual(receipt.purchase.webOrderLineItemId, 1000000034637027)
        XCTAssertEqual(receipt.signature.count, 256)
        XCTAssertNoThrow(try verifier(Self.signer3).verify(receipt))
    }

    func testVersion2ReceiptWithSHA1AndA1024BitKeyVerifies() throws {
        let receipt = try LegacyTransactionReceipt.parse(base64: transactionReceipt(version: 2, signer: Self.signer2))
        XCTAssertEqual(receipt.signature.count, 128)
        XCTAssertNoThrow(try verifier(Self.signer2).verify(receipt))
    }

    /// The path that pushes Swift-owned intermediates onto an OpenSSL stack and reads the leaf's
    /// key: every certificate here is created and dropped inside the call, so a borrowed pointer
    /// outliving its owner would surface here (reliably so under AddressSanitizer).
    func testReceiptSignedUnderAnIntermediateVerifiesRepeatedlyWithOwnedCertificateReferences() throws {
        let root = TestSigner(commonName: "Test Root", isCA: true)
        let intermediate = TestSigner(commonName: "Test iTunes CA", issuer: root, isCA: true, serial: 2)
        let leaf = TestSigner(commonName: "Test iTunes Store", issuer: intermediate, serial: 3)
        let receipt = try LegacyTransactionReceipt.parse(base64: transactionReceipt(version: 3, signer: leaf))
        for _ in 0..<50 {
            try LegacyTransactionReceiptVerifier(rootCertificates: [Data(root.certificateDER)],
                                                 intermediateCertificates: [Data(intermediate.certificateDER)]).verify(receipt)
        }
        let withoutIntermediate = try LegacyTransactionReceiptVerifier(rootCertificates: [Data(root.certificateDER)])
        XCTAssertEqual(code { try withoutIntermediate.verify(receipt) }, .untrustedRoot)
    }

    /// The outer plist is outside the signature: an attacker can say "Production" there of a
    /// sandbox purchase. Only the signed purchase-info may state the environment.
    func testOuterPlistFieldsAreReportedAsUnsignedAndNeverAsTheEnvironment() throws {
        let receipt = try LegacyTransactionReceipt.parse(base64: transactionReceipt(version: 3, signer: Self.signer3))
        XCTAssertEqual(receipt.unsignedEnvironment, "Sandbox")
        XCTAssertEqual(receipt.unsignedPod, "100")
        XCTAssertEqual(receipt.unsignedSigningStatus, "0")
        XCTAssertNil(receipt.environment)
        guard case .object(let json) = receipt.jsonValue else { return XCTFail("not an object") }
        XCTAssertNil(json["environment"])
        XCTAssertNil(json["pod"])
        XCTAssertNil(json["signingStatus"])
        XCTAssertEqual(json["unsigned"], .object(["environment": .string("Sandbox"), "pod": .string("100"), "signingStatus": .string("0")]))

        let signedEnvironment = purchaseInfo.replacingOccurrences(of: "{\n", with: "{\n\t\"environment\" = \"Sandbox\";\n")
        let stated = try LegacyTransactionReceipt.parse(base64: transactionReceipt(version: 3, signer: Self.signer3, signedInfo: signedEnvironment))
        XCTAssertEqual(stated.environment, "Sandbox")
        XCTAssertNoThrow(try verifier(Self.signer3).verify(stated))
    }

    func testAlteredPurchaseInfoIsAnInvalidSignature() throws {
        let forged = purchaseInfo.replacingOccurrences(of: "com.example.monthly", with: "com.example.lifetime")
        let receipt = try LegacyTransactionReceipt.parse(base64: transactionReceipt(version: 3, signer: Self.signer3, sentInfo: forged))
        XCTAssertEqual(receipt.purchase.productId, "com.example.lifetime")
        XCTAssertEqual(code { try self.verifier(Self.signer3).verify(receipt) }, .invalidSignature)
    }

    /// The purchase info with its purchase date moved `years` from now: the time its signature is judged at.
    func purchased(yearsFromNow years: Double) -> String {
        let millis = Int64((Date().timeIntervalSince1970 + years * 365.25 * 86_400) * 1000)
        return purchaseInfo.replacingOccurrences(of: "\"purchase-date-ms\" = \"1490127939469\"",
                                                 with: "\"purchase-date-ms\" = \"\(millis)\"")
    }

    func testASignerExpiredAtThePurchaseDateIsRefusedAsExpired() throws {
        // The signer is valid ten years either side of now: a purchase eleven years on is after its end.
        let late = try LegacyTransactionReceipt.parse(base64: transactionReceipt(version: 3, signer: Self.signer3,
                                                                                  signedInfo: purchased(yearsFromNow: 11)))
        XCTAssertEqual(code { try self.verifier(Self.signer3).verify(late) }, .certificateExpired)
        let early = try LegacyTransactionReceipt.parse(base64: transactionReceipt(version: 2, signer: Self.signer2,
                                                                                   signedInfo: purchased(yearsFromNow: -11)))
        XCTAssertEqual(code { try self.verifier(Self.signer2).verify(early) }, .certificateNotYetValid)
        // The same signature judged within the signer's validity verifies: only the time refused it.
        XCTAssertNoThrow(try verifier(Self.signer3).verify(late, at: Date()))
    }

    func testCertificateNotFromThePinnedRootIsUntrusted() throws {
        let receipt = try LegacyTransactionReceipt.parse(base64: transactionReceipt(version: 3, signer: Self.signer3))
        XCTAssertEqual(code { try self.verifier(Self.signer2).verify(receipt) }, .untrustedRoot)
    }

    func testSignatureBlobWithWrongCertificateLengthIsMalformed() throws {
        let good = try LegacyTransactionReceipt.parse(base64: transactionReceipt(version: 3, signer: Self.signer3))
        var blob = [good.signatureVersion] + good.signature + [0, 0, 0xFF, 0xFF] + good.certificate
        let plist = "{ \"signature\" = \"\(Data(blob).base64EncodedString())\"; \"purchase-info\" = \"\(Data(purchaseInfo.utf8).base64EncodedString())\"; }"
        XCTAssertEqual(code { _ = try LegacyTransactionReceipt.parse(plist: Array(plist.utf8)) }, .malformedReceipt)
        blob[0] = 4
        let unknownVersion = "{ \"signature\" = \"\(Data(blob).base64EncodedString())\"; \"purchase-info\" = \"e30=\"; }"
        XCTAssertEqual(code { _ = try LegacyTransactionReceipt.parse(plist: Array(unknownVersion.utf8)) }, .malformedReceipt)
    }

    func testOldStylePlistParserIsStrict() throws {
        XCTAssertEqual(try OldStylePlist.parseDictionary(Array("{ \"a\" = \"x\\\"y\"; }\n".utf8)), ["a": "x\"y"])
        for bad in ["{ \"a\" = \"1\"; \"a\" = \"2\"; }", "{ a = \"1\"; }", "{ \"a\" = \"1\" }", "{ \"a\" = \"1\"; } x",
                    "{ \"a\" = { \"b\" = \"c\"; }; }", "{ \"a\" = \"1", "garbage", "", "{ \"a\" = \"\\q\"; }"] {
            XCTAssertEqual(code { _ = try OldStylePlist.parseDictionary(Array(bad.utf8)) }, .malformedReceipt, bad)
        }
        XCTAssertEqual(code { _ = try OldStylePlist.parseDictionary(Array("{}".utf8), maxBytes: 1) }, .inputTooLarge)
    }
}
