import AppStoreSimulator
import Foundation
import IAPCore
import TestSupport
import XCTest

/// `/metrics` over the wire after real calls from the gateway to the simulator: upstream calls are
/// counted per Apple endpoint, environment and outcome, and nothing secret reaches the page.
final class UpstreamMetricsTests: XCTestCase {
    func testUpstreamCallsAppearByEndpointWithInjectedFaultsCountedAsErrorsAndNoSecrets() async throws {
        let gw = try await GatewayE2E.start(self)
        let subscription = try gw.buy(owner: "device-alice")
        let removeAds = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")

        let receiptAnswer = try await gw.verifyReceipt(subscription.receiptBase64, account: "alice")
        XCTAssertEqual(receiptAnswer.status, 200, receiptAnswer.text)
        // One injected 5xx: the first getTransactionInfo attempt fails, the retry succeeds.
        gw.simulator.faults.failNext(1)
        let idAnswer = try await gw.verifyTransactionId(removeAds.transactionId, account: "bob")
        XCTAssertEqual(idAnswer.status, 200, idAnswer.text)
        XCTAssertEqual(gw.simulator.faults.settings().failNext, 0, "the injected failure was met")

        let page = try await gw.get("/metrics")
        XCTAssertEqual(page.status, 200, page.text)
        let samples = Self.samples(page.text)

        XCTAssertEqual(samples[#"iapgw_upstream_calls_total{endpoint="verifyReceipt",environment="production",outcome="ok"}"#], 1)
        XCTAssertEqual(samples[#"iapgw_upstream_calls_total{endpoint="getTransactionInfo",environment="production",outcome="http_5xx"}"#], 1)
        XCTAssertGreaterThanOrEqual(
            samples[#"iapgw_upstream_calls_total{endpoint="getTransactionInfo",environment="production",outcome="ok"}"#] ?? 0, 1)
        XCTAssertEqual(samples[#"iapgw_upstream_call_duration_seconds_count{endpoint="verifyReceipt",environment="production"}"#], 1)
        let infoCalls = samples.filter { $0.key.hasPrefix(#"iapgw_upstream_calls_total{endpoint="getTransactionInfo",environment="production","#) }
            .values.reduce(0, +)
        XCTAssertEqual(samples[#"iapgw_upstream_call_duration_seconds_count{endpoint="getTransactionInfo",environment="production"}"#],
                       infoCalls, "every call, failed or not, is in the latency histogram")

        let forbidden = [gw.harness.sharedSecret, gw.harness.apiKey, removeAds.transactionId, subscription.transactionId,
                         "eyJ", "Bearer", "http://", "https://", "?", "inApps", "127.0.0.1"]
        for secret in forbidden {
            XCTAssertFalse(page.text.contains(secret), "/metrics contains \(secret)")
        }
    }

    func testRateLimitedCallsAreCountedAsHTTP4xxPerAttempt() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")
        gw.simulator.faults.rateLimitNext(2, retryAfterSeconds: 1)

        let answer = try await gw.verifyTransactionId(purchase.transactionId, account: "bob")
        XCTAssertEqual(answer.status, 200, answer.text)

        let samples = Self.samples(try await gw.get("/metrics").text)
        XCTAssertEqual(samples[#"iapgw_upstream_calls_total{endpoint="getTransactionInfo",environment="production",outcome="http_4xx"}"#], 2)
        XCTAssertEqual(samples[#"iapgw_upstream_calls_total{endpoint="getTransactionInfo",environment="production",outcome="ok"}"#], 1)
    }

    /// "name{labels} value" lines, keyed by everything before the value.
    static func samples(_ text: String) -> [String: Double] {
        var out: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            out[String(line[..<space])] = value
        }
        return out
    }
}
