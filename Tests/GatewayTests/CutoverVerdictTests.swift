import AppStoreSimulator
import AppleTrust
import Demo
import Foundation
@testable import Gateway
@testable import IAPConfig
import IAPCore
import TestSupport
import XCTest

/// The cutover verdict end to end: receipts sent over real HTTP under compare routing,
/// both generations answered by the simulator (planted discrepancies, junk, repeats), the verdict
/// read from `GET /v1/apps/{bundleId}/cutover-impact` and the dashboard.
final class CutoverVerdictTests: XCTestCase {
    /// Small thresholds, so a handful of purchases can make the app ready.
    static func smallRule(_ options: inout DemoHarness.Options) {
        options.receiptRouting = "compare"
        options.nonceRequired = false
        var readiness = AppPolicy.Readiness()
        readiness.minimumPurchaseChains = 3
        readiness.minimumAccounts = 3
        readiness.minimumObservationDays = 0
        options.readiness = readiness
    }

    /// One purchase of each product type of the demo catalog, each its own owner.
    private func buyEveryType(_ gw: GatewayE2E, prefix: String) throws -> [(receipt: String, account: String)] {
        let monthly = try gw.buy(owner: "\(prefix)-device-1")
        let removeAds = try gw.buy(GatewayE2E.removeAds, owner: "\(prefix)-device-2")
        let coins = try gw.simulator.purchase(PurchaseRequest(bundleId: gw.bundleId, productId: "com.example.demo.coins100",
                                                              type: .consumable, owner: "\(prefix)-device-3", price: 990))
        return [(monthly.receiptBase64, "\(prefix)-1"), (removeAds.receiptBase64, "\(prefix)-2"), (coins.receiptBase64, "\(prefix)-3")]
    }

    private func impact(_ gw: GatewayE2E) async throws -> JSONValue {
        let answer = try await gw.send("GET", "\(gw.appURL)/cutover-impact")
        XCTAssertEqual(answer.status, 200, answer.text)
        return answer.json
    }

    private func unmet(_ json: JSONValue) -> [String] {
        json["verdict"]?["unmet"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    func testRepeatedComparisonsOfOneReceiptNeverMakeAnAppReady() async throws {
        let gw = try await GatewayE2E.start(self, configure: Self.smallRule)
        let purchase = try gw.buy(owner: "device-solo")
        for _ in 0..<6 {
            let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: "solo")
            XCTAssertEqual(answer.status, 200, answer.text)
        }

        let json = try await impact(gw)

        XCTAssertEqual(json["verdict"]?["ready"], .bool(false))
        XCTAssertEqual(json["environments"]?.arrayValue?.first?["purchaseChains"], .int(1))
        let stored = try await gw.send("GET", "\(gw.appURL)/comparisons?limit=1").json["comparisons"]?.arrayValue?.first
        XCTAssertEqual(stored?["account"]?.stringValue, "solo")
        XCTAssertEqual(stored?["environment"]?.stringValue, "Production")
        XCTAssertNotNil(stored?["appVersion"]?.stringValue, "the receipt's application_version, for the per-version breakdown")
        XCTAssertEqual(stored?["purchases"]?.arrayValue?.map { $0["serverAPIState"]?.stringValue }, ["active"])
        XCTAssertEqual(unmet(json), [
            "1 purchase chain(s) compared (at least 3)", "1 account(s) (at least 3)",
            "product type(s) not compared yet: Consumable, Non-Consumable",
        ], "every unmet criterion, with its numbers")
    }

    func testJunkRefusedByBothIsCountedApartAndAPurchaseUnknownToTheServerAPIBlocksTheCutover() async throws {
        let gw = try await GatewayE2E.start(self, configure: Self.smallRule)
        for (receipt, account) in try buyEveryType(gw, prefix: "ok") {
            let answer = try await gw.verifyReceipt(receipt, account: account)
            XCTAssertEqual(answer.status, 200, answer.text)
        }
        var json = try await impact(gw)
        XCTAssertEqual(json["verdict"]?["ready"], .bool(true), "\(unmet(json))")

        // Junk anyone could push through an app backend: refused by both paths, never in agreement.
        let junk = [Data("not a receipt at all".utf8).base64EncodedString(),
                    Data((0..<300).map { UInt8($0 % 256) }).base64EncodedString()]
        for receipt in junk {
            let answer = try await gw.verifyReceipt(receipt, account: "attacker")
            XCTAssertEqual(answer.status, 422, answer.text)
        }
        json = try await impact(gw)
        XCTAssertEqual(json["refusedByBoth"], .int(2))
        XCTAssertEqual(json["verdict"]?["ready"], .bool(true), "junk cannot hold the verdict down: \(unmet(json))")

        // A purchase the Server API does not know: the account would lose it at cutover.
        let lost = try gw.buy(GatewayE2E.removeAds, owner: "device-lost")
        try gw.simulator.plant(.onlyInLegacy, transactionId: lost.transactionId)
        _ = try await gw.verifyReceipt(lost.receiptBase64, account: "lost")
        json = try await impact(gw)

        XCTAssertEqual(json["verdict"]?["ready"], .bool(false))
        XCTAssertEqual(unmet(json), [
            "agreement 75.0% of 4 purchase chain(s) (at least 99.5%)",
            "1 purchase chain(s) with unexplained disagreements (none allowed)",
            "1 account(s) would lose access at cutover (none allowed)",
        ])
        XCTAssertEqual(json["accounts"]?.arrayValue?.map { "\($0["change"]?.stringValue ?? "") \($0["account"]?.stringValue ?? "")" },
                       ["losesAccess lost"])
        XCTAssertEqual(json["accounts"]?.arrayValue?.first?["legacyState"]?.stringValue, "active")
        XCTAssertEqual(json["accounts"]?.arrayValue?.first?["serverAPIState"]?.stringValue, "notFound",
                       "named, never a blank")
        XCTAssertEqual(json["byProduct"], .array([.object([
            "productId": .string(GatewayE2E.removeAds), "losesAccess": .int(1), "gainsAccess": .int(0), "differentExpiry": .int(0),
        ])]))

        let page = try await gw.send("GET", "\(gw.harness.gatewayURL)/dashboard?app=\(gw.bundleId)")
        XCTAssertEqual(page.status, 200)
        XCTAssertTrue(page.text.contains("1 account(s) would lose access at cutover (none allowed)"))
        XCTAssertTrue(page.text.contains("<td class=\"new\"><em class=\"none\">notFound</em></td>"), page.text)
        let csv = try await gw.send("GET", "\(gw.harness.gatewayURL)/dashboard?app=\(gw.bundleId)&format=csv")
        let impactRows = csv.text.components(separatedBy: "\r\n").filter { $0.hasPrefix("\"impact\"") }
        XCTAssertEqual(impactRows.count, 1, csv.text)
        XCTAssertTrue(impactRows.first?.hasSuffix("\"lost\",\"\(lost.originalTransactionId)\",\"\(GatewayE2E.removeAds)\",\"losesAccess\",\"\",\"\",\"active\",\"notFound\",\"\"") == true,
                      impactRows.first ?? "")
        XCTAssertTrue(page.text.contains("<div id=\"refused-by-both\">Refused by both (junk, not counted): <strong>2</strong>"))
        XCTAssertTrue(page.text.contains("<table id=\"impact-accounts\">"))
    }

    func testAServerAPIFailureOnOnePurchaseBlocksTheCutoverUnlessThePolicyExplainsIt() async throws {
        for explained in [false, true] {
            let gw = try await GatewayE2E.start(self) { options in
                Self.smallRule(&options)
                if explained { options.readiness?.explainedFailures = ["UPSTREAM_CREDENTIALS_REJECTED": "key rotated on 2 Nov"] }
            }
            for (receipt, account) in try buyEveryType(gw, prefix: "ok") {
                _ = try await gw.verifyReceipt(receipt, account: account)
            }
            let later = try gw.buy(GatewayE2E.removeAds, owner: "device-later")
            // The Server API now refuses the gateway's key; verifyReceipt still answers.
            try gw.simulator.registerApp(SimulatedApp(bundleId: gw.bundleId, appAppleId: gw.harness.options.appAppleId,
                                                      sharedSecret: gw.harness.sharedSecret,
                                                      issuerId: "57246542-96fe-1a63-e053-0824d011072a", keyId: "SIMKEY0001",
                                                      apiPublicKey: try ECPrivateKey.generate().publicKey))
            _ = try await gw.verifyReceipt(later.receiptBase64, account: "later")

            let json = try await impact(gw)
            let production = json["environments"]?.arrayValue?.first
            if explained {
                XCTAssertEqual(production?["explainedFailures"], .int(1))
                XCTAssertEqual(unmet(json), ["agreement 75.0% of 4 purchase chain(s) (at least 99.5%)"],
                               "explained, the failure no longer blocks by itself")
            } else {
                XCTAssertEqual(unmet(json), [
                    "agreement 75.0% of 4 purchase chain(s) (at least 99.5%)", "1 unexplained path failure(s) (none allowed)",
                ])
            }
            let failures = try await gw.send("GET", "\(gw.appURL)/comparisons?failure=UPSTREAM_CREDENTIALS_REJECTED")
            XCTAssertEqual(failures.json["comparisons"]?.arrayValue?.map { $0["account"]?.stringValue }, ["later"])

            // The dashboard shows the failure class: code, path, product, count, first/last seen, a sample.
            let page = try await gw.send("GET", "\(gw.harness.gatewayURL)/dashboard?app=\(gw.bundleId)").text
            let table = try XCTUnwrap(page.range(of: "<table id=\"failure-classes\">").map { String(page[$0.lowerBound...]) })
            let row = try XCTUnwrap(table.components(separatedBy: "</tr>").first { $0.contains("UPSTREAM_CREDENTIALS_REJECTED") })
            XCTAssertTrue(row.contains("<td>serverAPI</td>"), row)
            XCTAssertTrue(row.contains("<td class=\"id\">\(GatewayE2E.removeAds)</td><td>1</td>"), row)
            XCTAssertTrue(row.contains("account <span class=\"id\">later</span>"), row)
            XCTAssertTrue(row.contains("transaction <span class=\"id\">\(later.transactionId)</span>"), row)
            XCTAssertTrue(row.contains("<time title=\""), "first and last seen as dates: \(row)")
            XCTAssertTrue(row.contains(explained ? "key rotated on 2 Nov" : "no: blocks the cutover"), row)
        }
    }
}
