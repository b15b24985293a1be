import AppStoreSimulator
import Foundation
import IAPCore
import TestSupport
import XCTest

/// Two `iapgw serve` processes on one PostgreSQL database, as a deployment runs them behind a load
/// balancer: conflicting claims sent to both leave one owner, and notifications Apple delivers to
/// either (or, retrying, to both) are applied once and announced once.
final class MultiInstanceTests: XCTestCase {
    private struct Deployment {
        let e2e: NotificationE2E
        let storage: TestStorage
        let bases: [String]
    }

    private func startTwoInstances() async throws -> Deployment {
        let e2e = try await NotificationE2E.start(self)
        let (config, storage) = try separateGatewayConfig(from: e2e.gw.harness.directory, harnessDatabase: e2e.gw.sqlitePath,
                                                          requirePostgres: true, test: self)
        var bases: [String] = []
        for _ in 0..<2 {
            let instance = try GatewayProcess(config: config, environment: storage.processEnvironment)
            addTeardownBlock { instance.kill9() }
            bases.append("http://127.0.0.1:\(try await instance.port())")
        }
        return Deployment(e2e: e2e, storage: storage, bases: bases)
    }

    func testConflictingClaimsSentToBothInstancesLeaveExactlyOneOwnerPerPurchase() async throws {
        let d = try await startTwoInstances()
        let purchases = try (0..<6).map { try d.e2e.subscribe(owner: "device-\($0)") }
        var won: [String: [String]] = [:]
        var refusals: [String] = []
        let gw = d.e2e.gw
        try await withThrowingTaskGroup(of: (String, String, GatewayAnswer).self) { group in
            for (p, purchase) in purchases.enumerated() {
                let (transactionId, chain) = (purchase.transactionId, purchase.originalTransactionId)
                for claimant in 0..<6 {
                    let url = "\(d.bases[claimant % 2])/v1/apps/\(gw.bundleId)/verify"
                    let account = "acct-\(p)-\(claimant)"
                    group.addTask {
                        (chain, account, try await gw.send("POST", url, body: Array(JSONValue.object([
                            "account": .string(account), "transactionId": .string(transactionId)]).jsonText.utf8)))
                    }
                }
            }
            for try await (chain, account, answer) in group {
                if answer.status == 200 {
                    won[chain, default: []].append(account)
                } else {
                    refusals.append("\(answer.status) \(answer.errorCode ?? answer.text)")
                }
            }
        }

        XCTAssertEqual(Set(won.keys), Set(purchases.map(\.originalTransactionId)), "every purchase has an owner")
        XCTAssertTrue(won.values.allSatisfy { $0.count == 1 }, "one winner per purchase: \(won)")
        XCTAssertEqual(Set(refusals), ["409 TRANSACTION_BOUND_TO_OTHER_ACCOUNT"])
        let owners = try d.storage.rows("SELECT ownership_key || '=' || account FROM ownership ORDER BY 1").map { $0[0] }
        XCTAssertEqual(owners,
                       won.map { "\($0.key)=\($0.value[0])" }.sorted(), "the database agrees with the answers")
    }

    func testNotificationsDeliveredToBothInstancesAreAppliedOnceAndAnnouncedOnce() async throws {
        let d = try await startTwoInstances()
        var payloads: [String] = []
        var lastRenewal: [String: SimulatedPurchase] = [:]
        for i in 0..<5 {
            let purchase = try d.e2e.subscribe(owner: "device-\(i)")
            let claim = try await d.e2e.gw.send("POST", "\(d.bases[i % 2])/v1/apps/\(d.e2e.bundleId)/verify",
                                                body: Array(JSONValue.object([
                                                    "account": .string("user-\(i)"),
                                                    "transactionId": .string(purchase.transactionId)]).jsonText.utf8))
            XCTAssertEqual(claim.status, 200, claim.text)
            for _ in 0..<2 {
                let renewal = try d.e2e.simulator.renew(originalTransactionId: purchase.originalTransactionId)
                payloads.append(try await d.e2e.signed("DID_RENEW", about: renewal))
                lastRenewal["user-\(i)"] = renewal
            }
        }
        // Apple retries a delivery it thinks failed: here every notification reaches both instances at once.
        let gw = d.e2e.gw
        try await withThrowingTaskGroup(of: Int.self) { group in
            for payload in payloads {
                for base in d.bases {
                    let url = "\(base)/v1/notifications/\(gw.bundleId)"
                    group.addTask {
                        try await gw.send("POST", url, body: Array(JSONValue.object(["signedPayload": .string(payload)]).jsonText.utf8),
                                          apiKey: .some(nil)).status
                    }
                }
            }
            for try await status in group { XCTAssertEqual(status, 200) }
        }

        try await d.e2e.eventually("both instances drain the inbox and the outbox", seconds: 20) {
            try d.storage.scalar("""
                SELECT (SELECT count(*) FROM notification_inbox WHERE processed_at IS NULL)
                     + (SELECT count(*) FROM webhook_outbox WHERE delivered_at IS NULL)
                """) == "0"
        }
        XCTAssertEqual(try d.storage.scalar("SELECT count(*) FROM notification_inbox"), String(payloads.count),
                       "one inbox row per notification, whichever instance took it first")
        let outboxKeys = try d.storage.rows("SELECT idempotency_key FROM webhook_outbox").map { $0[0] }
        XCTAssertEqual(outboxKeys.count, payloads.count, "one event per renewal")
        try await d.e2e.eventually("the receiver has every event", seconds: 10) {
            Set(d.e2e.webhooks.accepted.map(\.idempotencyKey)) == Set(outboxKeys)
        }
        let accepted = d.e2e.webhooks.accepted.map(\.idempotencyKey)
        XCTAssertEqual(accepted.count, Set(accepted).count, "no event sent by both instances: \(accepted.sorted())")

        for (account, renewal) in lastRenewal {
            for base in d.bases {
                let answer = try await d.e2e.gw.send("GET", "\(base)/v1/apps/\(d.e2e.bundleId)/accounts/\(account)/entitlements")
                let rows = answer.json["entitlements"]?.arrayValue ?? []
                XCTAssertEqual(rows.count, 1, answer.text)
                XCTAssertEqual(rows.first?["expiresDate"], try expiresDate(of: renewal).map(JSONValue.int),
                               "both instances answer the newest renewal for \(account)")
            }
        }
    }

    func testReadinessFollowsTheDatabaseAndTheGatewayRecoversWhenItIsBack() async throws {
        let d = try await startTwoInstances()
        let base = d.bases[0]
        let ready = try await d.e2e.gw.send("GET", "\(base)/readyz")
        XCTAssertEqual(ready.status, 200, ready.text)

        // The database refuses connections and its sessions are cut (a failover, a restart).
        try d.storage.administer("ALTER DATABASE {db} ALLOW_CONNECTIONS false")
        try d.storage.administer("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}'")
        let down = try await d.e2e.gw.send("GET", "\(base)/readyz")
        XCTAssertEqual(down.status, 503, down.text)
        XCTAssertEqual(down.errorCode, "STORAGE_UNAVAILABLE")
        let purchase = try d.e2e.subscribe(owner: "device-outage")
        let refused = try await d.e2e.gw.send("POST", "\(base)/v1/apps/\(d.e2e.bundleId)/verify", body: Array(JSONValue.object([
            "account": "olga", "transactionId": .string(purchase.transactionId)]).jsonText.utf8))
        XCTAssertEqual(refused.status, 503, "no verdict without the ledger: \(refused.text)")
        XCTAssertNotNil(refused.headers["retry-after"])

        try d.storage.administer("ALTER DATABASE {db} ALLOW_CONNECTIONS true")
        try await d.e2e.eventually("the gateway is ready again", seconds: 10) {
            try await d.e2e.gw.send("GET", "\(base)/readyz").status == 200
        }
        let granted = try await d.e2e.gw.send("POST", "\(base)/v1/apps/\(d.e2e.bundleId)/verify", body: Array(JSONValue.object([
            "account": "olga", "transactionId": .string(purchase.transactionId)]).jsonText.utf8))
        XCTAssertEqual(granted.status, 200, granted.text)
    }
}
