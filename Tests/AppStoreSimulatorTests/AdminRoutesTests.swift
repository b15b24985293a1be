@testable import AppStoreSimulator
import Foundation
import IAPCore
import UpstreamHTTP
import XCTest

final class AdminRoutesTests: XCTestCase {
    private func admin(_ f: SimulatorFixture, _ method: String, _ path: String, _ body: JSONValue? = nil) async throws -> (Int, [String: JSONValue]) {
        let r = try await f.client.send(UpstreamRequest(method: method, url: f.sim.baseURL.absoluteString + "/admin" + path,
                                                       headers: [("Content-Type", "application/json")],
                                                       body: body.map { Array($0.jsonText.utf8) }))
        return (r.status, try StrictJSON().parse(r.body).objectValue ?? [:])
    }

    func testAdminRegistersBuysRefundsAndSetsFaultsOverHTTP() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        var (status, json) = try await admin(f, "POST", "/apps", .object([
            "bundleId": .string("com.example.admin"), "appAppleId": .int(42), "sharedSecret": .string("s3cret"),
            "keyId": .string("ADMINKEY01"),
        ]))
        XCTAssertEqual(status, 200)
        XCTAssertNotNil(json["privateKeyPEM"]?.stringValue)

        (status, json) = try await admin(f, "POST", "/purchases", .object([
            "bundleId": .string("com.example.admin"), "productId": .string("p.monthly"),
            "type": .string("Auto-Renewable Subscription"), "owner": .string("d1"), "environment": .string("Sandbox"),
            "subscriptionGroupIdentifier": .string("g1"), "offer": .object(["type": .string("freeTrial")]),
        ]))
        XCTAssertEqual(status, 200)
        let id = try XCTUnwrap(json["transactionId"]?.stringValue)
        XCTAssertEqual(json["environment"], .string("Sandbox"))

        (status, json) = try await admin(f, "POST", "/transactions/\(id)/refund", .object(["reason": .int(1)]))
        XCTAssertEqual(status, 200)
        let receipt = try XCTUnwrap(json["receiptBase64"]?.stringValue)
        let (_, verified) = try await f.verifyReceipt(.object(["receipt-data": .string(receipt), "password": .string("s3cret")]),
                                                      environment: "sandbox")
        XCTAssertEqual(verified["status"], .int(0))
        XCTAssertEqual(verified["latest_receipt_info"]?.arrayValue?.first?["cancellation_reason"], .string("1"))

        (status, _) = try await admin(f, "PUT", "/faults/sandbox", .object(["failNext": .int(1), "verifyReceiptStatus": .int(21199)]))
        XCTAssertEqual(status, 200)
        let (_, failed) = try await f.verifyReceipt(.object(["receipt-data": .string(receipt)]), environment: "sandbox")
        XCTAssertEqual(failed["status"], .int(21199))
        XCTAssertEqual(failed["is-retryable"], .bool(true))

        (status, _) = try await admin(f, "POST", "/transactions/999/refund")
        XCTAssertEqual(status, 404)
    }

    func testFaultCountsReportEveryRequestToApplesSurfaceAndTheFaultedOnesAndSurviveAReset() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        (_, _) = try await admin(f, "PUT", "/faults/all", .object(["failNext": .int(2), "verifyReceiptHTTP503": .bool(true)]))
        for _ in 0..<3 { _ = try await f.verifyReceipt(.object(["receipt-data": .string("AAAA")])) }

        var (status, json) = try await admin(f, "GET", "/faults")
        XCTAssertEqual(status, 200)
        XCTAssertEqual(json["requests"], .int(3), "admin requests are not counted")
        XCTAssertEqual(json["faulted"], .int(2))

        (_, _) = try await admin(f, "DELETE", "/faults")
        _ = try await f.verifyReceipt(.object(["receipt-data": .string("AAAA")]))
        (status, json) = try await admin(f, "GET", "/faults")
        XCTAssertEqual(json["requests"], .int(4), "a reset clears settings, not the counts a test reads differences of")
        XCTAssertEqual(json["faulted"], .int(2))
        XCTAssertEqual(f.sim.faults.counts.requests, 4)
    }
}
