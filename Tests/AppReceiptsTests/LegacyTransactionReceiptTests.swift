import AppReceipts
import COpenSSL
import Foundation
import IAPCore
import XCTest

/// A self-made RSA key and self-signed certificate: there is no real iOS 6 transaction receipt
/// vector, so these tests sign their own in the documented format.
final class SelfSignedRSA: @unchecked Sendable {
    let key: OpaquePointer
    let certificateDER: [UInt8]

    init(bits: Int32, commonName: String) {
        let ctx = EVP_PKEY_CTX_new_id(NID_rsaEncryption, nil)!
        defer { EVP_PKEY_CTX_free(ctx) }
        precondition(EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, bits) == 1)
        var pkey: OpaquePointer?
        precondition(EVP_PKEY_keygen(ctx, &pkey) == 1)
        key = pkey!
        let x = X509_new()!
        defer { X509_free(x) }
        X509_set_version(x, 2)
        ASN1_INTEGER_set(X509_get_serialNumber(x), 1)
        X509_gmtime_adj(X509_getm_notBefore(x), -86_400 * 3650)
        X509_gmtime_adj(X509_getm_notAfter(x), 86_400 * 3650)
        X509_set_pubkey(x, key)
        let name = X509_get_subject_name(x)
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonName, -1, -1, 0)
        X509_set_issuer_name(x, name)
        precondition(X509_sign(x, key, EVP_sha256()) > 0)
        var out: UnsafeMutablePointer<UInt8>?
        let n = i2d_X509(x, &out)
        certificateDER = Array(UnsafeBufferPointer(start: out, count: Int(n)))
        CRYPTO_free(out, #file, #line)
    }

    deinit { EVP_PKEY_free(key) }

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
}

final class LegacyTransactionReceiptTests: XCTestCase {
    static let signer3 = SelfSignedRSA(bits: 2048, commonName: "Test iTunes Store Receipt Signing")
    static let signer2 = SelfSignedRSA(bits: 1024, commonName: "Test iTunes Store Receipt Signing v2")

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

    func transactionReceipt(version: UInt8, signer: SelfSignedRSA, signedInfo: String? = nil, sentInfo: String? = nil) -> String {
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

    func verifier(_ signer: SelfSignedRSA) throws -> LegacyTransactionReceiptVerifier {
        try LegacyTransactionReceiptVerifier(rootCertificates: [Data(signer.certificateDER)])
    }

    func code(_ body: () throws -> Void) -> VerificationError.Code? {
        do { try body(); return nil } catch { return (error as? VerificationError)?.code }
    }

    func testVersion3ReceiptParsesIntoAnInAppRecordAndVerifies() throws {
        let receipt = try LegacyTransactionReceipt.parse(base64: transactionReceipt(version: 3, signer: Self.signer3))
        XCTAssertEqual(receipt.environment, "Sandbox")
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

    func testAlteredPurchaseInfoIsAnInvalidSignature() throws {
        let forged = purchaseInfo.replacingOccurrences(of: "com.example.monthly", with: "com.example.lifetime")
        let receipt = try LegacyTransactionReceipt.parse(base64: transactionReceipt(version: 3, signer: Self.signer3, sentInfo: forged))
        XCTAssertEqual(receipt.purchase.productId, "com.example.lifetime")
        XCTAssertEqual(code { try self.verifier(Self.signer3).verify(receipt) }, .invalidSignature)
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
