import AppReceipts
import Foundation
import IAPCore
import TestPKI
import XCTest

/// Apple-signed receipts from ../shared/testdata/apple-real: the facts its README states.
final class RealReceiptTests: XCTestCase {
    func reader(_ roots: [String] = [AppleRealVectors.appleIncRoot], allowXcode: Bool = false) throws -> AppReceiptReader {
        try AppReceiptReader(roots: roots.map { try AppleRealVectors.data($0) }, allowXcodeReceipts: allowXcode)
    }

    func expectError(_ code: VerificationError.Code, file: StaticString = #filePath, line: UInt = #line,
                     _ body: () throws -> Void) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            XCTAssertEqual((error as? VerificationError)?.code, code, "\(error)", file: file, line: line)
        }
    }

    func iso(_ text: String) -> Int64 { Int64(ISO8601DateFormatter().date(from: text)!.timeIntervalSince1970 * 1000) }

    func testProductionReceiptParsesEveryDocumentedFact() throws {
        let result = try reader().read(base64: AppleRealVectors.text(AppleRealVectors.receiptProduction))
        let r = result.receipt
        XCTAssertTrue(result.signatureVerified)
        XCTAssertEqual(r.receiptType, "Production")
        XCTAssertEqual(r.bundleId, "org.getpure.pure-iphone")
        XCTAssertEqual(r.appVersion, "15741")
        XCTAssertEqual(r.originalAppVersion, "434")
        XCTAssertEqual(r.creationDate, iso("2024-02-23T17:27:16Z"))
        XCTAssertEqual(r.sha1Hash?.count, 20)
        XCTAssertEqual(r.inAppPurchases.count, 4)
        let week = try XCTUnwrap(r.inAppPurchases.first { $0.transactionId == "340001196262039" })
        XCTAssertEqual(week.productId, "org.getpure.pure.Week")
        XCTAssertEqual(week.webOrderLineItemId, 340000558053130)
        XCTAssertEqual(week.originalTransactionId, "340001196262039")
        XCTAssertEqual(week.quantity, 1)
        XCTAssertEqual(week.purchaseDate, iso("2023-05-09T23:20:55Z"))
        XCTAssertEqual(week.expiresDate, iso("2023-05-16T23:20:55Z"))
        XCTAssertNil(week.cancellationDate)
        XCTAssertEqual(week.isTrialPeriod, false)
        XCTAssertEqual(week.isInIntroOfferPeriod, false)
        XCTAssertTrue(result.transactionIds.contains("340001196262039"))
        XCTAssertEqual(r.inAppPurchases.compactMap(\.promotionalOfferId), ["org.getpure.pure.Month.Offer.3M.PayToGo", "org.getpure.pure.Month.Offer.3M.PayToGo"])
    }

    func testProductionReceiptIsRefusedUnderTheWrongRoot() throws {
        expectError(.untrustedRoot) {
            _ = try self.reader([AppleRealVectors.appleRootG3]).read(base64: AppleRealVectors.text(AppleRealVectors.receiptProduction))
        }
    }

    func testProductionReceiptLeafIsExpiredToday() throws {
        expectError(.certificateExpired) {
            _ = try self.reader().read(base64: AppleRealVectors.text(AppleRealVectors.receiptProduction), at: Date(timeIntervalSince1970: 1_790_000_000))
        }
    }

    func testUnrepresentableVerificationTimesAreRefusedNotTrapped() throws {
        let text = try AppleRealVectors.text(AppleRealVectors.receiptProduction)
        for seconds in [Double.nan, .infinity, -.infinity, 1e300, -1e300] {
            expectError(.invalidCertificateChain) {
                _ = try self.reader().read(base64: text, at: Date(timeIntervalSince1970: seconds))
            }
        }
    }

    func testSandboxG5ReceiptParsesAndVerifies() throws {
        let r = try reader().read(base64: AppleRealVectors.text(AppleRealVectors.receiptSandboxG5)).receipt
        XCTAssertEqual(r.receiptType, "ProductionSandbox")
        XCTAssertEqual(r.bundleId, "dev.bonzer.weeka.app")
        XCTAssertEqual(r.creationDate, iso("2025-12-26T18:39:47Z"))
        XCTAssertEqual(r.inAppPurchases.count, 2)
        let record = try XCTUnwrap(r.inAppPurchases.first { $0.transactionId == "2000001092134138" })
        XCTAssertEqual(record.productId, "dev.bonzer.weeka.app.subscription.pro.annual")
    }

    func testLegacySandboxReceiptKeepsAll187Records() throws {
        let result = try reader().read(base64: AppleRealVectors.text(AppleRealVectors.receiptSandboxLegacy))
        XCTAssertTrue(result.signatureVerified)
        XCTAssertEqual(result.receipt.inAppPurchases.count, 187)
        XCTAssertTrue(result.receipt.inAppPurchases.allSatisfy { $0.transactionId != nil && $0.productId != nil })
    }

    func testXcodeReceiptsParseButAreNotAppStoreReceipts() throws {
        for name in [AppleRealVectors.receiptXcode, AppleRealVectors.receiptXcodeWithPurchases] {
            let text = try AppleRealVectors.text(name)
            let unverified = try reader().read(base64: text, mode: .unverified)
            XCTAssertEqual(unverified.receipt.receiptType, "Xcode")
            XCTAssertNotNil(unverified.receipt.bundleId)
            XCTAssertFalse(unverified.signatureVerified)
            XCTAssertEqual(unverified.signatureError?.code, .notAppStoreReceipt)
            expectError(.notAppStoreReceipt) { _ = try self.reader().read(base64: text) }
            // Even a policy that allows Xcode receipts refuses them under Apple's root.
            expectError(.untrustedRoot) { _ = try self.reader(allowXcode: true).read(base64: text) }
        }
    }
}
