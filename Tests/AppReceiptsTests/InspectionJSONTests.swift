@testable import AppReceipts
import Foundation
import IAPCore
import TestPKI
import XCTest

/// `iapgw receipt inspect` prints what these return: identifiers only from verified receipts,
/// unless the caller asked for unverified ones.
final class InspectionJSONTests: XCTestCase {
    let productionId = "340001196262039"

    func read(_ der: [UInt8]) throws -> VerifiedAppReceipt {
        try AppReceiptReader(roots: [AppleRealVectors.data(AppleRealVectors.appleIncRoot)]).read(der: der, mode: .unverified)
    }

    func text(_ json: JSONValue) -> String { json.jsonText }

    func testUnverifiedReceiptPrintsNoTransactionIdsAnywhere() throws {
        let result = try read(tamperedBundleIdDER())
        XCTAssertFalse(result.signatureVerified)
        let json = result.inspectionJSON(includeUnverifiedIdentifiers: false)
        XCTAssertFalse(text(json).contains(productionId))
        guard case .object(let top) = json, case .object(let receipt)? = top["receipt"] else { return XCTFail("shape") }
        XCTAssertNil(top["transactionIds"])
        XCTAssertNil(receipt["inAppPurchases"])
        XCTAssertNotNil(top["withheld"])
        XCTAssertEqual(receipt["bundleId"], .string("xrg.getpure.pure-iphone"))
    }

    func testUnverifiedReceiptPrintsIdsWhenExplicitlyAsked() throws {
        let json = try read(tamperedBundleIdDER()).inspectionJSON(includeUnverifiedIdentifiers: true)
        XCTAssertTrue(text(json).contains(productionId))
        guard case .object(let top) = json else { return XCTFail("shape") }
        XCTAssertNil(top["withheld"])
    }

    func testVerifiedReceiptPrintsRecordsAndIds() throws {
        let result = try read(productionDER())
        XCTAssertTrue(result.signatureVerified)
        let json = result.inspectionJSON(includeUnverifiedIdentifiers: false)
        guard case .object(let top) = json, case .array(let ids)? = top["transactionIds"] else { return XCTFail("shape") }
        XCTAssertTrue(ids.contains(.string(productionId)))
        XCTAssertNil(top["withheld"])
    }

    func testUnverifiedTransactionReceiptPrintsNoPurchaseInfoIds() throws {
        let signer = TestSigner(commonName: "Unpinned")
        let info = "{ \"transaction-id\" = \"1000000283718134\"; \"original-transaction-id\" = \"1000000283718133\"; \"product-id\" = \"p\"; \"purchase-date-ms\" = \"1490127939469\"; }"
        let signature = signer.sign([3] + Array(info.utf8), sha256: true)
        let n = signer.certificateDER.count
        let blob = [3] + signature + [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + signer.certificateDER
        let plist = "{ \"signature\" = \"\(Data(blob).base64EncodedString())\"; \"purchase-info\" = \"\(Data(info.utf8).base64EncodedString())\"; }"
        let receipt = try LegacyTransactionReceipt.parse(plist: Array(plist.utf8))
        let hidden = receipt.inspectionJSON(signatureVerified: false, includeUnverifiedIdentifiers: false)
        XCTAssertFalse(text(hidden).contains("100000028371813"))
        XCTAssertTrue(text(hidden).contains("\"p\""))
        for json in [receipt.inspectionJSON(signatureVerified: true, includeUnverifiedIdentifiers: false),
                     receipt.inspectionJSON(signatureVerified: false, includeUnverifiedIdentifiers: true)] {
            XCTAssertTrue(text(json).contains("1000000283718134"))
            XCTAssertTrue(text(json).contains("1000000283718133"))
        }
    }
}
