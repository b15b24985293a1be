import AppStoreSimulator
import Foundation
import IAPCore
import Synchronization
import TestSupport
import XCTest

/// SIGKILL the gateway again and again during a burst of notifications and racing claims: what
/// it answered 200 must survive, nothing may be applied twice, no purchase may get two owners.
final class CrashResilienceTests: XCTestCase {
    private struct Claim: Sendable { let transactionId: String; let ownershipKey: String; let account: String }
    private struct Outcome: Sendable {
        var acceptedNotifications: [String: Int] = [:]  // notificationUUID → 200s received
        var acceptedClaims: [Claim] = []
        var unexpected: [String] = []
        var connectionFailures = 0
        /// 200s answered by each incarnation of the gateway (index = restart number).
        var answeredBy: [Int: Int] = [:]
    }

    /// The gateway currently up (nil while it is dead), so clients aim at whichever incarnation runs.
    private final class Target: Sendable {
        let base = Mutex<(url: String, incarnation: Int)?>(nil)
        let outcome = Mutex(Outcome())
        /// Until the killer is done, senders keep re-sending what they already sent (as Apple and apps retry).
        let killing = Mutex(true)
    }

    func testTwentySIGKILLsDuringABurstLoseNoAcceptedNotificationApplyNoneTwiceAndGiveNoPurchaseTwoOwners() async throws {
        let e2e = try await NotificationE2E.start(self)
        let (config, storage) = try separateGatewayConfig(from: e2e.gw.harness.directory,
                                                          harnessDatabase: e2e.gw.sqlitePath, test: self)
        var rng = SplitMix(seed: 0x5EED_C0FFEE)

        // The burst, made up front: 10 subscription chains (initial buy + 3 renewals), 8 consumables (half refunded).
        var chains: [[(uuid: String, payload: String)]] = []
        var purchases: [(id: String, ownershipKey: String, refunded: Bool)] = []
        var lastExpiry: [String: Int64] = [:]
        for i in 0..<10 {
            let first = try e2e.subscribe(owner: "device-s\(i)")
            purchases.append((first.transactionId, first.originalTransactionId, false))
            var chain = [try await notification("SUBSCRIBED", "INITIAL_BUY", first, e2e)]
            for _ in 0..<3 {
                let renewal = try e2e.simulator.renew(originalTransactionId: first.originalTransactionId)
                chain.append(try await notification("DID_RENEW", nil, renewal, e2e))
                lastExpiry[first.originalTransactionId] = try expiresDate(of: renewal)
            }
            chains.append(chain)
        }
        for i in 0..<8 {
            let coins = try e2e.buyConsumable(owner: "device-c\(i)")
            purchases.append((coins.transactionId, coins.transactionId, i % 2 == 0))
            if i % 2 == 0 {
                chains.append([try await notification("REFUND", nil, try e2e.simulator.refund(transactionId: coins.transactionId), e2e)])
            }
        }
        // Three accounts race for every purchase, in a shuffled order.
        var claims: [(id: String, ownershipKey: String, account: String)] = []
        for p in purchases { for account in ["ana", "ben", "cy"] { claims.append((p.id, p.ownershipKey, account)) } }
        claims.shuffle(using: &rng)

        let target = Target()
        let started = Date()
        let deadline = started.addingTimeInterval(90)
        let client = e2e.gw
        let bundleId = e2e.bundleId
        let apiKey = e2e.gw.harness.apiKey

        try await withThrowingTaskGroup(of: Void.self) { group in
            // Notification senders: chains split over 4 senders, each chain in order, every one retried to a 200
            // (as Apple does), a quarter of them sent once more after their 200 (as Apple may).
            for worker in 0..<4 {
                let mine = chains.enumerated().filter { $0.offset % 4 == worker }.map(\.element)
                group.addTask {
                    let notes = Array(mine.joined())
                    func send(_ note: (uuid: String, payload: String)) async throws {
                        let body = Array(JSONValue.object(["signedPayload": .string(note.payload)]).jsonText.utf8)
                        try await Self.untilFinal(target, deadline) { base in
                            let answer = try await client.send("POST", "\(base)/v1/notifications/\(bundleId)", body: body, apiKey: .some(nil))
                            if answer.status == 200 { target.outcome.withLock { $0.acceptedNotifications[note.uuid, default: 0] += 1 } }
                            return answer
                        }
                    }
                    var again = SplitMix(seed: UInt64(worker))
                    for note in notes {
                        for _ in 0..<(again.next() % 4 == 0 ? 2 : 1) { try await send(note) }
                    }
                    while target.killing.withLock({ $0 }) { try await send(notes[Int(again.next() % UInt64(notes.count))]) }
                }
            }
            // Claimers: 3 of them over the shuffled claims.
            for worker in 0..<3 {
                let mine = claims.enumerated().filter { $0.offset % 3 == worker }.map(\.element)
                group.addTask {
                    var again = SplitMix(seed: UInt64(100 + worker))
                    var index = 0
                    while index < mine.count || target.killing.withLock({ $0 }) {
                        let claim = index < mine.count ? mine[index] : mine[Int(again.next() % UInt64(mine.count))]
                        index += 1
                        let body = Array(JSONValue.object(["account": .string(claim.account), "transactionId": .string(claim.id)]).jsonText.utf8)
                        try await Self.untilFinal(target, deadline) { base in
                            let answer = try await client.send("POST", "\(base)/v1/apps/\(bundleId)/verify", body: body, apiKey: .some(apiKey))
                            if answer.status == 200 {
                                target.outcome.withLock { $0.acceptedClaims.append(Claim(transactionId: claim.id, ownershipKey: claim.ownershipKey, account: claim.account)) }
                            } else if answer.status < 500, !["TRANSACTION_BOUND_TO_OTHER_ACCOUNT", "TRANSACTION_REVOKED"].contains(answer.errorCode ?? "") {
                                target.outcome.withLock { $0.unexpected.append("claim \(claim.id) by \(claim.account): \(answer.status) \(answer.text)") }
                            }
                            return answer
                        }
                    }
                }
            }
            // The killer: 20 incarnations, each SIGKILLed 50–450 ms after it starts listening; then one that stays.
            var pauses = (0..<20).map { _ in 50 + Int(rng.next() % 400) }
            for incarnation in 0..<20 {
                let gateway = try GatewayProcess(config: config, environment: storage.processEnvironment)
                addTeardownBlock { gateway.kill9() }
                let port = try await gateway.port()
                target.base.withLock { $0 = ("http://127.0.0.1:\(port)", incarnation) }
                try await Task.sleep(for: .milliseconds(pauses.removeFirst()))
                target.base.withLock { $0 = nil }
                gateway.kill9()
            }
            let survivor = try GatewayProcess(config: config, environment: storage.processEnvironment)
            addTeardownBlock { survivor.kill9() }
            let port = try await survivor.port()
            target.base.withLock { $0 = ("http://127.0.0.1:\(port)", 20) }
            target.killing.withLock { $0 = false }
            try await group.waitForAll()
        }

        try await e2e.eventually("the last gateway processes its inbox", seconds: 20) {
            try storage.scalar("SELECT count(*) FROM notification_inbox WHERE processed_at IS NULL AND parked_at IS NULL") == "0"
        }
        let outcome = target.outcome.withLock { $0 }
        print("crash burst: \(Date().timeIntervalSince(started))s, \(outcome.acceptedNotifications.count) notifications and "
              + "\(outcome.acceptedClaims.count) claims answered 200, \(outcome.connectionFailures) attempts met a dead gateway")
        XCTAssertEqual(outcome.unexpected, [], "no claim refused for a reason other than ownership or a refund")
        XCTAssertGreaterThan(outcome.connectionFailures, 0, "some requests met a killed gateway")
        XCTAssertGreaterThanOrEqual(outcome.answeredBy.keys.filter { $0 < 20 }.count, 10,
                                    "the burst spans the kills: most incarnations answered before their SIGKILL \(outcome.answeredBy)")

        // Every notification answered 200 is in the inbox once, processed, not parked.
        let inbox = try storage.rows("SELECT notification_id, CASE WHEN processed_at IS NULL THEN 0 ELSE 1 END, CASE WHEN parked_at IS NULL THEN 1 ELSE 0 END FROM notification_inbox "
                                     + "WHERE bundle_id = '\(bundleId)'")
        var inboxRows: [String: [[String]]] = [:]
        for row in inbox { inboxRows[row[0], default: []].append(row) }
        let allUUIDs = Set(chains.joined().map(\.uuid))
        XCTAssertEqual(Set(outcome.acceptedNotifications.keys), allUUIDs, "every notification was eventually answered 200")
        for uuid in outcome.acceptedNotifications.keys {
            let rows = inboxRows[uuid] ?? []
            XCTAssertEqual(rows.count, 1, "notification \(uuid) is in the inbox exactly once")
            XCTAssertEqual(rows.first.map { [$0[1], $0[2]] }, ["1", "1"], "notification \(uuid) processed, not parked")
        }

        // Applied once: one outbox row per idempotency key, and each chain ends at its last renewal.
        let keys = try storage.rows("SELECT idempotency_key FROM webhook_outbox WHERE bundle_id = '\(bundleId)'").map { $0[0] }
        XCTAssertEqual(keys.count, Set(keys).count, "an idempotency key in the outbox twice")
        XCTAssertFalse(keys.isEmpty)
        for (chain, expiry) in lastExpiry {
            XCTAssertEqual(try storage.scalar("SELECT expires_date FROM subscription_states WHERE bundle_id = '\(bundleId)' "
                                              + "AND original_transaction_id = '\(chain)'"), String(expiry), "chain \(chain)")
        }

        // One owner per purchase, and it is the account each 200 claim was for.
        var owners: [String: [String]] = [:]
        for row in try storage.rows("SELECT ownership_key, account FROM ownership WHERE bundle_id = '\(bundleId)'") {
            owners[row[0], default: []].append(row[1])
        }
        XCTAssertTrue(owners.values.allSatisfy { $0.count == 1 }, "a purchase with two owners: \(owners)")
        for claim in outcome.acceptedClaims {
            XCTAssertEqual(owners[claim.ownershipKey], [claim.account], "claim of \(claim.transactionId) answered 200 to \(claim.account)")
        }
        for purchase in purchases where !purchase.refunded {
            XCTAssertNotNil(owners[purchase.ownershipKey], "unrefunded purchase \(purchase.id) has an owner")
        }
        XCTAssertEqual(try storage.rows("SELECT transaction_id FROM transactions WHERE bundle_id = '\(bundleId)' "
                                        + "GROUP BY transaction_id HAVING count(*) > 1"), [], "a transaction granted twice")
        XCTAssertEqual(try storage.rows("SELECT t.transaction_id FROM transactions t JOIN ownership o ON o.bundle_id = t.bundle_id "
                                        + "AND o.ownership_key = t.ownership_key WHERE t.bundle_id = '\(bundleId)' AND t.account <> o.account"),
                       [], "a transaction granted to an account that does not own its purchase")
    }

    private func notification(_ type: String, _ subtype: String?, _ purchase: SimulatedPurchase,
                              _ e2e: NotificationE2E) async throws -> (uuid: String, payload: String) {
        let payload = try await e2e.signed(type, subtype, about: purchase)
        return (try XCTUnwrap(try jwsPayload(payload)["notificationUUID"]?.stringValue), payload)
    }

    /// Sends until the gateway gives a final answer (not 5xx, not a dead connection), as a client that retries would.
    private static func untilFinal(_ target: Target, _ deadline: Date,
                                   _ attempt: (String) async throws -> GatewayAnswer) async throws {
        while Date() < deadline {
            if let base = target.base.withLock({ $0 }) {
                do {
                    let answer = try await attempt(base.url)
                    if answer.status == 200 { target.outcome.withLock { $0.answeredBy[base.incarnation, default: 0] += 1 } }
                    if answer.status < 500 { return }
                } catch {
                    target.outcome.withLock { $0.connectionFailures += 1 }
                }
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw GatewayProcessError(message: "no final answer before the deadline")
    }
}
