import AppStoreSimulator
import Demo
import Foundation
import Gateway
import IAPConfig
import IAPCore
import UpstreamHTTP

/// The demo's rollout: the cohort moved to 5 % by hand (as `iapgw rollout advance` does), a cohort
/// account's purchase that the Server API answers as refunded while verifyReceipt does not (a
/// planted disagreement), and the guard rolling the step back on its own within its interval.
enum DemoRollout {
    /// Steps of 5, 25 and 100 %, advanced by hand, the guard every second.
    static let planXML = """
        <steps type="array"><item type="integer">5</item><item type="integer">25</item><item type="integer">100</item></steps>
        <minimumDwellSeconds type="integer">60</minimumDwellSeconds>
        <minimumComparedChains type="integer">20</minimumComparedChains>
        <guardIntervalSeconds type="integer">1</guardIntervalSeconds>
        """

    /// True when the step was rolled back by the guard, naming the planted purchase.
    static func walk(_ demo: DemoHarness) async throws -> Bool {
        print("\nrollout: receipts of a growing, sticky share of accounts answered by the Server API")
        let advanced = try await demo.parts.rollout(bundleId: demo.bundleId, action: .advance)
        print("  advanced by hand: \(advanced["percent"]?.intValue ?? -1) % of accounts now answered by the Server API")
        // An account in the first 5 %, found by the same stable hash every instance uses.
        let account = (0...).lazy.map { "grace\($0)" }
            .first { RolloutCohort.contains(percent: 5, bundleId: demo.bundleId, account: $0) }!
        let purchase = try demo.simulator.purchase(PurchaseRequest(
            bundleId: demo.bundleId, productId: "com.example.demo.removeads", type: .nonConsumable,
            owner: "device-\(account)", price: 2_990))
        try demo.simulator.plant(.refundOnlyIn(.serverAPI), transactionId: purchase.transactionId)
        print("  planted: the Server API answers \(account)'s purchase (\(purchase.originalTransactionId)) as refunded; verifyReceipt does not")
        // The routing reads the step at most once a second.
        try await Task.sleep(for: .milliseconds(1_100))
        let client = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration())
        let app = "\(demo.gatewayURL)/v1/apps/\(demo.bundleId)"
        func post(_ route: String, _ body: JSONValue) async throws -> (status: Int, json: JSONValue) {
            let r = try await client.send(UpstreamRequest(method: "POST", url: "\(app)/\(route)", headers: [
                ("Authorization", "Bearer \(demo.apiKey)"), ("Content-Type", "application/json"),
            ], body: Array(body.jsonText.utf8)))
            return (r.status, (try? StrictJSON().parse(r.body)) ?? .null)
        }
        let nonce = try await post("nonces", .object(["account": .string(account)]))
        let answer = try await post("verify", .object(["account": .string(account), "receipt": .string(purchase.receiptBase64),
                                                       "nonce": nonce.json["nonce"] ?? .null]))
        let outcome = answer.json["error"]?["code"]?.stringValue ?? answer.json["verdict"]?.stringValue ?? ""
        print("  \(account)'s receipt, in the cohort: HTTP \(answer.status) \(outcome)"
              + (answer.json["adapter"]?.stringValue.map { " (answered by \($0))" } ?? ""))
        let deadline = Date().addingTimeInterval(10)
        var status = try await demo.parts.rollout(bundleId: demo.bundleId, action: .status)
        while status["percent"]?.intValue != 0, Date() < deadline {
            try await Task.sleep(for: .milliseconds(100))
            status = try await demo.parts.rollout(bundleId: demo.bundleId, action: .status)
        }
        for event in (status["events"]?.arrayValue ?? []).reversed() {
            print("  \(event["action"]?.stringValue ?? ""): \(event["fromPercent"]?.intValue ?? 0) % → \(event["toPercent"]?.intValue ?? 0) %"
                  + " by \(event["actor"]?.stringValue ?? ""): \(event["reason"]?.stringValue ?? "")"
                  + ((event["purchases"]?.arrayValue ?? []).isEmpty ? "" : " [\((event["purchases"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: " "))]"))
        }
        let rolledBack = status["percent"]?.intValue == 0
            && status["events"]?.arrayValue?.first?["actor"]?.stringValue == "guard"
            && status["events"]?.arrayValue?.first?["purchases"] == .array([.string(purchase.originalTransactionId)])
        print("\(rolledBack ? "ok  " : "FAIL") the guard rolled the rollout back on its own (now \(status["percent"]?.intValue ?? -1) %, paused)")
        return rolledBack
    }
}
