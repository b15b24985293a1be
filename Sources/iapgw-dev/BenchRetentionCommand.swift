import AppStoreSimulator
import CommandLineSupport
import Demo
import Foundation
import IAPCore
import Synchronization
import UpstreamHTTP

/// `iapgw-dev bench-retention`: latency of the Retention Messaging realtime endpoint over loopback
/// HTTP, as the App Store would see it: the signedPayload verified, the chain's account read from
/// the ledger (owner, entitlements, transactions), the rules applied, a promotional offer signed
/// (ES256) and the answer audited durably before the 200. Prints p50 / p99 / max and p99 as a share
/// of Apple's deadline (the Initiate Performance Test's threshold, about 700 ms).
struct BenchRetentionCommand: Subcommand {
    let name = "bench-retention"
    let summary = "benchmark: POST /v1/retention latency (p50, p99) against Apple's realtime deadline"
    let usage = """
        usage: iapgw-dev bench-retention [--count N] [--connections C] [--json FILE]
          --count        realtime requests (default 3000), over 50 subscriptions signed in advance
          --connections  concurrent HTTP connections (default 8)
          --json         also write the figures as a JSON object to FILE
        """
    /// Apple's documented threshold for the sandbox performance test (PerformanceTestConfig.responseTimeThreshold).
    static let appleDeadlineMs = 700.0

    func run(_ args: inout CommandLineArguments) async throws -> Int32 {
        let count = try args.positiveCount("--count", default: 3000)
        let connections = try args.positiveCount("--connections", default: 8)
        let jsonPath = try args.value("--json")
        try args.finish()
        return try await Self.bench(count: count, connections: connections, jsonPath: jsonPath)
    }

    static func bench(count: Int, connections: Int, jsonPath: String?) async throws -> Int32 {
        let fm = FileManager.default
        let directory = fm.temporaryDirectory.appendingPathComponent("iapgw-bench-retention-\(UUID().uuidString)", isDirectory: true)
        defer { try? fm.removeItem(at: directory) }
        let monthly = "com.example.demo.pro.monthly"
        var options = DemoHarness.Options()
        // Every request takes the most expensive path: account lookups, then a signed offer.
        options.extraPolicyXML = """
            <promotionalOffers type="array"><item><productId>\(monthly)</productId><offerId>STAY1</offerId><audience>subscribers</audience></item></promotionalOffers>
            <retentionMessages type="array"><item><productIds type="array"><item>\(monthly)</item></productIds>
              <states type="array"><item>active</item></states><noRefund type="bool">true</noRefund>
              <promotionalOffer><messageIdentifier>0b7a3c1e-0000-4000-8000-000000000003</messageIdentifier><offerId>STAY1</offerId></promotionalOffer></item></retentionMessages>
            """
        let harness = try await DemoHarness.start(directory: directory, options: options)
        let client = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(
            connectTimeout: .seconds(5), requestTimeout: .seconds(30), maxConnectionsPerHost: connections))
        let verifyURL = "\(harness.gatewayURL)/v1/apps/\(harness.bundleId)/verify"
        var bodies: [[UInt8]] = []
        for i in 0..<50 {
            let purchase = try harness.simulator.purchase(PurchaseRequest(
                bundleId: harness.bundleId, productId: monthly, type: .autoRenewable, owner: "bench-\(i)",
                subscriptionGroupIdentifier: "demo.pro", price: 4_990))
            let claim = JSONValue.object(["account": .string("account-\(i)"), "transactionId": .string(purchase.transactionId)])
            let claimed = try await client.send(UpstreamRequest(
                method: "POST", url: verifyURL,
                headers: [("Authorization", "Bearer \(harness.apiKey)"), ("Content-Type", "application/json")],
                body: Array(claim.jsonText.utf8)))
            guard claimed.status == 200 else { throw UsageError(message: "claiming a benchmark subscription answered \(claimed.status)") }
            let jws = try harness.simulator.signedRealtimeRequest(originalTransactionId: purchase.originalTransactionId)
            bodies.append(Array(JSONValue.object(["signedPayload": .string(jws)]).jsonText.utf8))
        }

        let url = "\(harness.gatewayURL)/v1/retention/\(harness.bundleId)"
        let next = TicketCounter()
        let requests = bodies
        let started = DispatchTime.now().uptimeNanoseconds
        let results = try await withThrowingTaskGroup(of: [(UInt64, Bool)].self) { group in
            for _ in 0..<connections {
                group.addTask {
                    var mine: [(UInt64, Bool)] = []
                    while true {
                        let i = next.take()
                        guard i < count else { return mine }
                        let t0 = DispatchTime.now().uptimeNanoseconds
                        let response = try await client.send(UpstreamRequest(
                            method: "POST", url: url, headers: [("Content-Type", "application/json")], body: requests[i % requests.count]))
                        let offered = response.status == 200 && String(decoding: response.body, as: UTF8.self).contains("promotionalOfferSignatureV2")
                        mine.append((DispatchTime.now().uptimeNanoseconds - t0, offered))
                    }
                }
            }
            var all: [(UInt64, Bool)] = []
            for try await part in group { all += part }
            return all
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        await harness.stop()

        let latencies = results.map { Double($0.0) / 1e6 }.sorted()
        let offered = results.filter(\.1).count
        func percentile(_ p: Double) -> Double { latencies[min(latencies.count - 1, Int((p * Double(latencies.count)).rounded(.up)) - 1)] }
        let p50 = percentile(0.50), p99 = percentile(0.99), maximum = latencies.last ?? 0
        print("POST /v1/retention (\(connections) connections, \(count) requests, \(offered) answered with a signed offer) "
              + "in \(String(format: "%.2f", seconds)) s: \(BenchCommand.format(Double(count) / seconds)) req/s")
        print(String(format: "  p50 %.2f ms, p99 %.2f ms, max %.2f ms", p50, p99, maximum))
        print(String(format: "  p99 / Apple's realtime deadline (%.0f ms): %.4f (%.0f× inside it)", appleDeadlineMs, p99 / appleDeadlineMs,
                     appleDeadlineMs / p99))
        if let jsonPath {
            let figures: JSONValue = .object([
                "count": .int(Int64(count)), "connections": .int(Int64(connections)), "offered": .int(Int64(offered)),
                "requests_per_s": .double(Double(count) / seconds), "p50_ms": .double(p50), "p99_ms": .double(p99),
                "max_ms": .double(maximum), "apple_deadline_ms": .double(appleDeadlineMs), "p99_share_of_deadline": .double(p99 / appleDeadlineMs),
            ])
            try Data((figures.jsonText + "\n").utf8).write(to: URL(fileURLWithPath: jsonPath))
        }
        return offered == count ? 0 : 1
    }
}
