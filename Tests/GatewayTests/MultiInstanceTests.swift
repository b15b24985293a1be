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
        var renewals: [String: [SimulatedPurchase]] = [:]
        var lastRenewal: [String: SimulatedPurchase] = [:]
        for i in 0..<5 {
            let purchase = try await claimedSubscription(d, account: "user-\(i)", via: d.bases[i % 2])
            for _ in 0..<2 {
                let renewal = try d.e2e.simulator.renew(originalTransactionId: purchase.originalTransactionId)
                payloads.append(try await d.e2e.signed("DID_RENEW", about: renewal))
                renewals[purchase.originalTransactionId, default: []].append(renewal)
                lastRenewal["user-\(i)"] = renewal
            }
        }
        // Apple retries a delivery it thinks failed: here every notification reaches both instances at once.
        try await postToBothInstances(d, payloads)

        try await d.e2e.eventually("both instances drain the inbox and the outbox", seconds: 20) {
            try d.storage.scalar("""
                SELECT (SELECT count(*) FROM notification_inbox WHERE processed_at IS NULL)
                     + (SELECT count(*) FROM webhook_outbox WHERE delivered_at IS NULL)
                """) == "0"
        }
        XCTAssertEqual(try d.storage.scalar("SELECT count(*) FROM notification_inbox"), String(payloads.count),
                       "one inbox row per notification, whichever instance took it first")
        // Concurrent delivery keeps no order: a chain's newer renewal may be applied before its older
        // one, which is then stale and not announced. So 5 to 10 events, each chain's as below.
        let announced = try announcedExpiries(d.storage)
        XCTAssertEqual(Set(announced.keys), Set(renewals.keys), "every chain is announced")
        for (chain, chainRenewals) in renewals {
            let (older, newer) = (try XCTUnwrap(expiresDate(of: chainRenewals[0])), try XCTUnwrap(expiresDate(of: chainRenewals[1])))
            XCTAssertTrue([[older, newer], [newer]].contains(announced[chain] ?? []),
                          "\(chain): both renewals in order, or only the newer: \(announced[chain] ?? [])")
        }
        let outboxKeys = try d.storage.rows("SELECT idempotency_key FROM webhook_outbox").map { $0[0] }
        try await d.e2e.eventually("the receiver has every event", seconds: 10) {
            Set(d.e2e.webhooks.accepted.map(\.idempotencyKey)) == Set(outboxKeys)
        }
        let accepted = d.e2e.webhooks.accepted.map(\.idempotencyKey)
        XCTAssertEqual(accepted.count, Set(accepted).count, "no event sent by both instances: \(accepted.sorted())")

        try await assertBothInstancesAnswer(d, lastRenewal)
    }

    /// The interleaving the test above meets by chance, forced: a chain whose renewals are applied in
    /// order is announced twice; one whose newer renewal is applied first is announced once, as the
    /// older renewal, applied last, is stale (`LifecycleVersion`) and changes nothing.
    func testAnOlderRenewalAppliedAfterTheNewerOneIsNotAnnounced() async throws {
        let d = try await startTwoInstances()
        var expected: [String: [Int64]] = [:]
        var deliveries: [String] = []
        var newest: [String: SimulatedPurchase] = [:]
        for (i, inOrder) in [true, false].enumerated() {
            let purchase = try await claimedSubscription(d, account: "user-\(i)", via: d.bases[i])
            let older = try d.e2e.simulator.renew(originalTransactionId: purchase.originalTransactionId)
            let olderPayload = try await d.e2e.signed("DID_RENEW", about: older)
            let newer = try d.e2e.simulator.renew(originalTransactionId: purchase.originalTransactionId)
            let newerPayload = try await d.e2e.signed("DID_RENEW", about: newer)
            deliveries += inOrder ? [olderPayload, newerPayload] : [newerPayload, olderPayload]
            let (olderEnd, newerEnd) = (try XCTUnwrap(expiresDate(of: older)), try XCTUnwrap(expiresDate(of: newer)))
            expected[purchase.originalTransactionId] = inOrder ? [olderEnd, newerEnd] : [newerEnd]
            newest["user-\(i)"] = newer
        }
        // One notification at a time, each to both instances at once, applied before the next is sent.
        for payload in deliveries {
            try await postToBothInstances(d, [payload])
            try await d.e2e.eventually("the instances apply it", seconds: 10) {
                try d.storage.scalar("SELECT count(*) FROM notification_inbox WHERE processed_at IS NULL") == "0"
            }
        }
        XCTAssertEqual(try d.storage.scalar("SELECT count(*) FROM notification_inbox"), String(deliveries.count))
        XCTAssertEqual(try announcedExpiries(d.storage), expected, "3 events for 4 renewals")
        try await assertBothInstancesAnswer(d, newest)
    }

    private func claimedSubscription(_ d: Deployment, account: String, via base: String) async throws -> SimulatedPurchase {
        let purchase = try d.e2e.subscribe(owner: "device-\(account)")
        let claim = try await d.e2e.gw.send("POST", "\(base)/v1/apps/\(d.e2e.bundleId)/verify", body: Array(JSONValue.object([
            "account": .string(account), "transactionId": .string(purchase.transactionId)]).jsonText.utf8))
        XCTAssertEqual(claim.status, 200, claim.text)
        return purchase
    }

    /// Posts every payload to both instances at once, as Apple's retries can; each answer must be 200.
    private func postToBothInstances(_ d: Deployment, _ payloads: [String]) async throws {
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
    }

    private func assertBothInstancesAnswer(_ d: Deployment, _ newestRenewal: [String: SimulatedPurchase]) async throws {
        for (account, renewal) in newestRenewal {
            for base in d.bases {
                let answer = try await d.e2e.gw.send("GET", "\(base)/v1/apps/\(d.e2e.bundleId)/accounts/\(account)/entitlements")
                let rows = answer.json["entitlements"]?.arrayValue ?? []
                XCTAssertEqual(rows.count, 1, answer.text)
                XCTAssertEqual(rows.first?["expiresDate"], try expiresDate(of: renewal).map(JSONValue.int),
                               "both instances answer the newest renewal for \(account)")
            }
        }
    }

    /// The expiry dates the outbox announces for each chain, in the order they were queued; every
    /// event must be an entitlement change.
    private func announcedExpiries(_ storage: TestStorage) throws -> [String: [Int64]] {
        var byChain: [String: [Int64]] = [:]
        for row in try storage.rows("SELECT event_json FROM webhook_outbox ORDER BY seq") {
            let event = try StrictJSON().parse(row[0])
            XCTAssertEqual(event["kind"], "entitlementChanged", row[0])
            let chain = try XCTUnwrap(event["originalTransactionId"]?.stringValue, row[0])
            guard case .int(let expires)? = event["expiresDate"] else { XCTFail("no expiresDate: \(row[0])"); continue }
            byChain[chain, default: []].append(expires)
        }
        return byChain
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
