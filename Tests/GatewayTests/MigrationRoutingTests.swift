import AppStoreSimulator
import AppleTrust
import Demo
import Foundation
import IAPCore
import TestSupport
import XCTest

/// Receipts under shadow and compare routing, end to end over the demo deployment.
final class MigrationRoutingTests: XCTestCase {
    /// Registers the demo app again in the simulator with a Server API key the gateway does not
    /// hold (same shared secret), so only the Server API path refuses the gateway.
    private func breakServerAPIKey(_ gw: GatewayE2E) throws {
        simulatorApp(gw, key: try ECPrivateKey.generate())
    }

    private func simulatorApp(_ gw: GatewayE2E, key: ECPrivateKey) {
        gw.simulator.registerApp(SimulatedApp(bundleId: gw.harness.bundleId, appAppleId: gw.harness.options.appAppleId,
                                              sharedSecret: gw.harness.sharedSecret, issuerId: "57246542-96fe-1a63-e053-0824d011072a",
                                              keyId: "SIMKEY0001", apiPublicKey: key.publicKey))
    }

    private func comparisons(_ gw: GatewayE2E, _ query: String = "") async throws -> GatewayAnswer {
        try await gw.send("GET", "\(gw.appURL)/comparisons\(query)")
    }

    /// Polls the comparisons route until `count` comparisons are stored (bounded: 10 s).
    private func storedComparisons(_ gw: GatewayE2E, count: Int, file: StaticString = #filePath,
                                   line: UInt = #line) async throws -> [JSONValue] {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let answer = try await comparisons(gw)
            XCTAssertEqual(answer.status, 200, answer.text, file: file, line: line)
            let found = answer.json["comparisons"]?.arrayValue ?? []
            if found.count >= count { return found }
            try await Task.sleep(for: .milliseconds(25))
        }
        XCTFail("no \(count) comparison(s) stored within 10 s", file: file, line: line)
        return []
    }

    func testShadowAnswersFromVerifyReceiptAndStoresTheServerAPIComparison() async throws {
        let gw = try await GatewayE2E.start(self) { $0.receiptRouting = "shadow" }
        let purchase = try gw.buy(owner: "device-alice")

        let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: "alice")

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.json["adapter"]?.stringValue, "verifyReceipt")
        XCTAssertNil(answer.json["comparison"], "shadow answers never wait for the comparison")
        let stored = try await storedComparisons(gw, count: 1)
        XCTAssertEqual(stored.first?["agreed"], .bool(true), "\(stored)")
        XCTAssertEqual(stored.first?["legacyMappingVersion"]?.stringValue, "verifyReceipt/v1")
        XCTAssertEqual(stored.first?["serverAPIMappingVersion"]?.stringValue, "serverAPI/v2")
        XCTAssertEqual(stored.first?["productIds"], .array([.string(GatewayE2E.monthly)]))
        XCTAssertEqual(stored.first?["evidenceKind"]?.stringValue, "receipt")
    }

    func testShadowAnswerIsUnchangedWhenTheServerAPIRefusesAndTheComparisonRecordsIt() async throws {
        let gw = try await GatewayE2E.start(self) { $0.receiptRouting = "shadow" }
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")
        try breakServerAPIKey(gw)

        let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: "bob")

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.json["verdict"]?.stringValue, "granted")
        XCTAssertEqual(answer.json["adapter"]?.stringValue, "verifyReceipt")
        XCTAssertEqual(answer.json["newlyGranted"], .array([.string(purchase.transactionId)]))
        let stored = try await storedComparisons(gw, count: 1)
        XCTAssertEqual(stored.first?["agreed"], .bool(false))
        XCTAssertEqual(stored.first?["serverAPIError"]?.stringValue, VerificationError.Code.upstreamCredentialsRejected.rawValue)
        XCTAssertNil(stored.first?["legacyError"])
        XCTAssertEqual(stored.first?["serverAPIMappingVersion"]?.stringValue, "serverAPI/v2",
                       "the failed path's mapping version is still recorded")
    }

    func testCompareAnswersFromTheServerAPIWithTheAgreementOfAConsistentPurchase() async throws {
        let gw = try await GatewayE2E.start(self) { $0.receiptRouting = "compare" }
        let purchase = try gw.buy(owner: "device-carol")

        let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: "carol")

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.json["adapter"]?.stringValue, "serverAPI")
        XCTAssertEqual(answer.json["comparison"]?["agreed"], .bool(true), answer.text)
        XCTAssertEqual(answer.json["comparison"]?["differences"], .array([]))
        let stored = try await storedComparisons(gw, count: 1)
        XCTAssertEqual(stored.first?["id"], answer.json["comparison"]?["id"], "the answered comparison is the stored one")
    }

    func testComparisonsRouteFiltersByClassProductAndTimeAndCountsAgreement() async throws {
        let gw = try await GatewayE2E.start(self) { $0.receiptRouting = "compare" }
        let consistent = try gw.buy(owner: "device-dave")
        let first = try await gw.verifyReceipt(consistent.receiptBase64, account: "dave")
        XCTAssertEqual(first.status, 200, first.text)
        let other = try gw.buy(GatewayE2E.removeAds, owner: "device-erin")
        try breakServerAPIKey(gw)
        let refused = try await gw.verifyReceipt(other.receiptBase64, account: "erin")
        XCTAssertEqual(refused.errorCode, VerificationError.Code.upstreamCredentialsRejected.rawValue,
                       "compare answers with the Server API's verdict")

        let all = try await comparisons(gw)
        XCTAssertEqual(all.json["counts"], .object(["total": .int(2), "agreed": .int(1)]), all.text)
        let byProduct = try await comparisons(gw, "?productId=\(GatewayE2E.removeAds)")
        XCTAssertEqual(byProduct.json["comparisons"]?.arrayValue?.map { $0["serverAPIError"]?.stringValue },
                       [VerificationError.Code.upstreamCredentialsRejected.rawValue])
        let byClass = try await comparisons(gw, "?class=entitlementMismatch")
        XCTAssertEqual(byClass.json["comparisons"], .array([]))
        let future = try await comparisons(gw, "?from=\(Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000)")
        XCTAssertEqual(future.json["comparisons"], .array([]))
        XCTAssertEqual(future.json["counts"], .object(["total": .int(0), "agreed": .int(0)]))
        let limited = try await comparisons(gw, "?limit=1")
        XCTAssertEqual(limited.json["comparisons"]?.arrayValue?.count, 1)

        let badClass = try await comparisons(gw, "?class=nonsense")
        XCTAssertEqual(badClass.status, 400, badClass.text)
        let unknown = try await comparisons(gw, "?colour=red")
        XCTAssertEqual(unknown.status, 400, unknown.text)
        let anonymous = try await gw.send("GET", "\(gw.appURL)/comparisons", apiKey: .some(nil))
        XCTAssertEqual(anonymous.status, 401, anonymous.text)
    }

    // MARK: A purchase the Server API does not know

    func testComparePurchaseUnknownToTheServerAPIIsReportedOnlyInLegacyNotAsAPathFailure() async throws {
        let gw = try await GatewayE2E.start(self) { $0.receiptRouting = "compare" }
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-fay")
        try gw.simulator.plant(.onlyInLegacy, transactionId: purchase.transactionId)

        _ = try await gw.verifyReceipt(purchase.receiptBase64, account: "fay")

        let stored = try await storedComparisons(gw, count: 1)
        XCTAssertNil(stored.first?["serverAPIError"], "a purchase Apple's Server API does not know is a finding: \(stored)")
        XCTAssertEqual(stored.first?["differences"]?.arrayValue?.map { $0["kind"]?.stringValue },
                       ["onlyInLegacy"], "\(stored)")
        XCTAssertEqual(stored.first?["differences"]?.arrayValue?.first?["transactionId"]?.stringValue, purchase.transactionId)
    }

    func testShadowReceiptWithOnePurchaseUnknownToTheServerAPIComparesTheOthersAsUsual() async throws {
        let gw = try await GatewayE2E.start(self) { $0.receiptRouting = "shadow" }
        _ = try gw.buy(owner: "device-gus")
        let unknown = try gw.buy(GatewayE2E.removeAds, owner: "device-gus")
        try gw.simulator.plant(.onlyInLegacy, transactionId: unknown.transactionId)
        let receipt = try gw.simulator.receipt(owner: "device-gus", bundleId: gw.bundleId)

        let answer = try await gw.verifyReceipt(receipt, account: "gus")

        XCTAssertEqual(answer.status, 200, answer.text)
        let stored = try await storedComparisons(gw, count: 1)
        XCTAssertNil(stored.first?["serverAPIError"], "\(stored)")
        XCTAssertEqual(stored.first?["transactionCount"], .int(2))
        XCTAssertEqual(stored.first?["differences"]?.arrayValue?.map { "\($0["kind"]?.stringValue ?? ""):\($0["transactionId"]?.stringValue ?? "")" },
                       ["onlyInLegacy:\(unknown.transactionId)"], "only the unknown purchase is a finding: \(stored)")
    }
}
