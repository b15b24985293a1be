import AppReceipts
@testable import AppStoreSimulator
import Foundation
import IAPCore
import XCTest

final class ReceiptAndVerifyReceiptTests: XCTestCase {
    func testReceiptVerifiesWithProjectReaderAndCarriesEveryPurchaseOfItsOwner() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let sub = try f.subscription()
        let coins = try f.oneTime("com.example.sim.coins", type: .consumable)
        _ = try f.oneTime("com.example.sim.other", type: .nonConsumable, owner: "device-2")
        let lifetime = try f.oneTime("com.example.sim.pro", type: .nonConsumable)

        let reader = try AppReceiptReader(roots: [f.sim.rootCertificateDER])
        let read = try reader.read(base64: lifetime.receiptBase64, mode: .verified)
        XCTAssertTrue(read.signatureVerified)
        XCTAssertEqual(read.receipt.bundleId, SimulatorFixture.bundleId)
        XCTAssertEqual(read.receipt.receiptType, "Production")
        XCTAssertEqual(read.receipt.appItemId, SimulatorFixture.appAppleId)
        XCTAssertEqual(Set(read.receipt.inAppPurchases.compactMap(\.transactionId)),
                       [sub.transactionId, coins.transactionId, lifetime.transactionId])
        let subRecord = try XCTUnwrap(read.receipt.inAppPurchases.first { $0.transactionId == sub.transactionId })
        XCTAssertEqual(subRecord.productId, "com.example.sim.monthly")
        XCTAssertNotNil(subRecord.expiresDate)
        XCTAssertNotNil(subRecord.webOrderLineItemId)
    }

    func testReceiptFromAnotherRootIsRefusedByReader() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let other = try AppStoreSimulator()
        let p = try f.oneTime("com.example.sim.pro", type: .nonConsumable)
        let reader = try AppReceiptReader(roots: [other.rootCertificateDER])
        XCTAssertThrowsError(try reader.read(base64: p.receiptBase64, mode: .verified))
    }

    func testValidProductionReceiptAnswersStatusZeroWithAppleShapedFieldsAndEchoesRequestData() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let p = try f.subscription(offer: .freeTrial)
        let (http, json) = try await f.verifyReceipt(.object([
            "receipt-data": .string(p.receiptBase64), "password": .string(SimulatorFixture.sharedSecret),
            "exclude-old-transactions": .bool(true), "request_data": .string("nonce-123"),
        ]))
        XCTAssertEqual(http, 200)
        XCTAssertEqual(json["status"], .int(0))
        XCTAssertEqual(json["environment"], .string("Production"))
        XCTAssertEqual(json["request_data"], .string("nonce-123"))
        let receipt = try XCTUnwrap(json["receipt"]?.objectValue)
        XCTAssertEqual(receipt["bundle_id"], .string(SimulatorFixture.bundleId))
        XCTAssertEqual(receipt["app_item_id"], .int(SimulatorFixture.appAppleId))
        XCTAssertNotNil(receipt["receipt_creation_date_ms"]?.stringValue.flatMap { Int64($0) })
        let info = try XCTUnwrap(json["latest_receipt_info"]?.arrayValue?.first?.objectValue)
        XCTAssertEqual(info["transaction_id"], .string(p.transactionId))
        XCTAssertEqual(info["quantity"], .string("1"))
        XCTAssertEqual(info["is_trial_period"], .string("true"))
        XCTAssertEqual(info["subscription_group_identifier"], .string("21000001"))
        XCTAssertEqual(info["in_app_ownership_type"], .string("PURCHASED"))
        XCTAssertNotNil(info["expires_date_ms"]?.stringValue.flatMap { Int64($0) })
        let pending = try XCTUnwrap(json["pending_renewal_info"]?.arrayValue?.first?.objectValue)
        XCTAssertEqual(pending["auto_renew_status"], .string("1"))
        XCTAssertEqual(pending["original_transaction_id"], .string(p.originalTransactionId))
        XCTAssertNotNil(json["latest_receipt"]?.stringValue)
    }

    func testStatusCodesForMalformedTamperedWrongSecretAndWrongEnvironment() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let prod = try f.subscription()
        let sandbox = try f.subscription(owner: "tester", environment: .sandbox)
        let secret = JSONValue.string(SimulatorFixture.sharedSecret)

        var (_, json) = try await f.verifyReceipt(.object(["receipt-data": .string("not base64 !!"), "password": secret]))
        XCTAssertEqual(json["status"], .int(21002))

        var tampered = Array(try XCTUnwrap(Data(base64Encoded: prod.receiptBase64)))
        let marker = Array("com.example.sim.monthly".utf8)
        let at = try XCTUnwrap(tampered.indices.first { Array(tampered[$0..<min($0 + marker.count, tampered.count)]) == marker })
        tampered[at + marker.count - 1] = UInt8(ascii: "X")
        (_, json) = try await f.verifyReceipt(.object(["receipt-data": .string(Data(tampered).base64EncodedString()), "password": secret]))
        XCTAssertEqual(json["status"], .int(21003))

        (_, json) = try await f.verifyReceipt(.object(["receipt-data": .string(prod.receiptBase64), "password": .string("wrong")]))
        XCTAssertEqual(json["status"], .int(21004))

        (_, json) = try await f.verifyReceipt(.object(["receipt-data": .string(sandbox.receiptBase64), "password": secret]))
        XCTAssertEqual(json["status"], .int(21007))

        (_, json) = try await f.verifyReceipt(.object(["receipt-data": .string(prod.receiptBase64), "password": secret]),
                                              environment: "sandbox")
        XCTAssertEqual(json["status"], .int(21008))

        (_, json) = try await f.verifyReceipt(.object(["receipt-data": .string(sandbox.receiptBase64), "password": secret]),
                                              environment: "sandbox")
        XCTAssertEqual(json["status"], .int(0))
        XCTAssertEqual(json["environment"], .string("Sandbox"))
        XCTAssertEqual(json["receipt"]?["app_item_id"], .int(0))
    }

    func testRefundShowsCancellationDateAndReasonInVerifyReceipt() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let p = try f.subscription()
        let refunded = try f.sim.refund(transactionId: p.transactionId, reason: 1)
        let (_, json) = try await f.verifyReceipt(.object([
            "receipt-data": .string(refunded.receiptBase64), "password": .string(SimulatorFixture.sharedSecret),
        ]))
        let info = try XCTUnwrap(json["latest_receipt_info"]?.arrayValue?.first?.objectValue)
        XCTAssertNotNil(info["cancellation_date_ms"]?.stringValue.flatMap { Int64($0) })
        XCTAssertEqual(info["cancellation_reason"], .string("1"))
        let reader = try AppReceiptReader(roots: [f.sim.rootCertificateDER])
        XCTAssertNotNil(try reader.read(base64: refunded.receiptBase64).receipt.inAppPurchases.first?.cancellationDate)
    }

    func testRenewalsAppearInLatestReceiptInfoAndExcludeOldKeepsOnlyTheNewest() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let p = try f.subscription()
        let renewed = try f.sim.renew(originalTransactionId: p.originalTransactionId)
        XCTAssertEqual(renewed.originalTransactionId, p.originalTransactionId)
        XCTAssertNotEqual(renewed.transactionId, p.transactionId)
        let secret = JSONValue.string(SimulatorFixture.sharedSecret)
        var (_, json) = try await f.verifyReceipt(.object(["receipt-data": .string(p.receiptBase64), "password": secret]))
        XCTAssertEqual(json["latest_receipt_info"]?.arrayValue?.count, 2)
        XCTAssertEqual(json["latest_receipt_info"]?.arrayValue?.first?["transaction_id"], .string(renewed.transactionId))
        (_, json) = try await f.verifyReceipt(.object(["receipt-data": .string(p.receiptBase64), "password": secret,
                                                       "exclude-old-transactions": .bool(true)]))
        XCTAssertEqual(json["latest_receipt_info"]?.arrayValue?.map { $0["transaction_id"] }, [.string(renewed.transactionId)])
    }

    func testInjectedFailureAnswersConfiguredStatusThenRecovers() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let p = try f.oneTime("com.example.sim.pro", type: .nonConsumable)
        f.sim.faults.setVerifyReceiptFailure(.status(21150), scope: .production)
        f.sim.faults.failNext(1, scope: .production)
        let body = JSONValue.object(["receipt-data": .string(p.receiptBase64)])
        var (http, json) = try await f.verifyReceipt(body)
        XCTAssertEqual(http, 200)
        XCTAssertEqual(json["status"], .int(21150))
        XCTAssertEqual(json["is-retryable"], .bool(true))
        (_, json) = try await f.verifyReceipt(body)
        XCTAssertEqual(json["status"], .int(0))

        f.sim.faults.setVerifyReceiptFailure(.http503, scope: .production)
        f.sim.faults.failNext(1, scope: .production)
        (http, _) = try await f.verifyReceipt(body)
        XCTAssertEqual(http, 503)
    }
}
