import Foundation
@testable import IAPCore
import XCTest
@testable import Ledger

/// Processing: once, in order, atomically; failures retried, parked, never blocking.
final class InboxProcessingTests: InboxTestCase {
    func testEachEntryIsAppliedOnceAndItsEffectsCommittedWithIt() throws {
        let ledger = try openLedger()
        XCTAssertTrue(try ledger.enqueue(entry("n-1", signedDate: t0)))
        var applied: [String] = []
        XCTAssertEqual(try drain(ledger, applied: &applied), ProcessReport(processed: 1))
        XCTAssertEqual(try drain(ledger, applied: &applied), ProcessReport())

        XCTAssertEqual(applied, ["n-1"])
        let state = try XCTUnwrap(ledger.subscriptionState(bundleId: app, originalTransactionId: "1000"))
        XCTAssertEqual(state.state, .active)
        XCTAssertEqual(state.lastSignedDate, t0)
        XCTAssertEqual(try ledger.dueWebhooks(now: t0 + day, limit: 10).map(\.event.idempotencyKey), ["n-1:1000"])
        XCTAssertEqual(try count(ledger, "SELECT processed_at FROM notification_inbox"), t0 + day)
    }

    func testEntriesAreAppliedOldestSignedDateFirstThenByArrival() throws {
        let ledger = try openLedger()
        XCTAssertTrue(try ledger.enqueue(entry("third", signedDate: t0 + 20, receivedAt: t0 + 21)))
        XCTAssertTrue(try ledger.enqueue(entry("second", signedDate: t0 + 10, receivedAt: t0 + 40)))
        XCTAssertTrue(try ledger.enqueue(entry("first", signedDate: t0 + 10, receivedAt: t0 + 30)))
        var applied: [String] = []
        try drain(ledger, applied: &applied)
        XCTAssertEqual(applied, ["first", "second", "third"])
    }

    func testApplyIsGivenTheStateThePreviousEntryOfTheChainLeft() throws {
        let ledger = try openLedger()
        XCTAssertTrue(try ledger.enqueue(entry("n-1", signedDate: t0)))
        XCTAssertTrue(try ledger.enqueue(entry("n-2", signedDate: t0 + 1, chain: "2000")))
        XCTAssertTrue(try ledger.enqueue(entry("n-3", signedDate: t0 + 2)))
        var seen: [String] = []
        _ = try ledger.processPending(limit: 10, now: t0) { (entry, stored) throws(VerificationError) in
            seen.append("\(entry.id)<-\(stored.map { String($0.lastSignedDate) } ?? "none")")
            return fakeOutcome(entry, stored)
        }
        XCTAssertEqual(seen, ["n-1<-none", "n-2<-none", "n-3<-\(t0)"])
    }

    func testFailureAfterPartialWorkLeavesNothingBehindAndTheEntryIsRetriedLater() throws {
        let ledger = try openLedger()
        XCTAssertTrue(try ledger.enqueue(entry("n-1", signedDate: t0)))
        // The state and the first webhook are written before the ledger refuses the second one.
        let report = try ledger.processPending(limit: 10, now: t0) { (entry, stored) throws(VerificationError) in
            var outcome = fakeOutcome(entry, stored)
            outcome.webhooks.append(webhook(for: entry, chain: "1000", bundleId: "com.example.other"))
            return outcome
        }
        XCTAssertEqual(report, ProcessReport(failed: 1))
        XCTAssertNil(try ledger.subscriptionState(bundleId: app, originalTransactionId: "1000"))
        XCTAssertEqual(try ledger.outboxDepth(), 0)
        XCTAssertEqual(try ledger.inboxDepth(), InboxDepth(pending: 1, retrying: 1, parked: 0))
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM notification_inbox WHERE processed_at IS NOT NULL"), 0)

        // Not before its backoff; then applied normally.
        XCTAssertEqual(try drain(ledger, now: t0), ProcessReport())
        XCTAssertEqual(try drain(ledger, now: t0 + InboxRetryPolicy.standard.delay(afterAttempts: 1)),
                       ProcessReport(processed: 1))
        XCTAssertEqual(try ledger.outboxDepth(), 1)
        XCTAssertEqual(try ledger.inboxDepth(), InboxDepth(pending: 0, retrying: 0, parked: 0))
    }

    func testOutcomeForAnotherChainIsRefusedAndNothingIsWritten() throws {
        let ledger = try openLedger()
        XCTAssertTrue(try ledger.enqueue(entry("n-1", signedDate: t0)))
        let report = try ledger.processPending(limit: 10, now: t0) { (entry, _) throws(VerificationError) in
            LifecycleOutcome(newState: SubscriptionState(bundleId: entry.bundleId, originalTransactionId: "9999",
                                                         productId: "p", state: .active, environment: .sandbox,
                                                         lastSignedDate: t0, source: "notification"))
        }
        XCTAssertEqual(report.failed, 1)
        XCTAssertNil(try ledger.subscriptionState(bundleId: app, originalTransactionId: "9999"))
    }

    func testFailingEntryDoesNotHoldBackTheEntriesAfterIt() throws {
        let ledger = try openLedger()
        for (index, id) in ["poison", "good-1", "good-2"].enumerated() {
            XCTAssertTrue(try ledger.enqueue(entry(id, signedDate: t0 + Int64(index), chain: "c-\(id)")))
        }
        let report = try ledger.processPending(limit: 10, now: t0) { (entry, stored) throws(VerificationError) in
            if entry.id == "poison" { throw VerificationError(.invalidFieldType, "cannot apply") }
            return fakeOutcome(entry, stored)
        }
        XCTAssertEqual(report, ProcessReport(processed: 2, failed: 1))
        XCTAssertNotNil(try ledger.subscriptionState(bundleId: app, originalTransactionId: "c-good-2"))
    }

    func testEntryFailingMaxAttemptsTimesIsParkedSurfacedAndReleasedByReplay() throws {
        let ledger = try openLedger()
        XCTAssertTrue(try ledger.enqueue(entry("poison", signedDate: t0)))
        let policy = InboxRetryPolicy.standard
        var now = t0
        var attempts = 0
        var parked = 0
        for _ in 0..<(policy.maxAttempts + 2) {
            let report = try ledger.processPending(limit: 10, now: now) { (_, _) throws(VerificationError) in
                attempts += 1
                throw VerificationError(.invalidFieldType, "cannot apply")
            }
            parked += report.parked
            now += policy.maxDelayMillis
        }
        XCTAssertEqual(attempts, policy.maxAttempts)
        XCTAssertEqual(parked, 1)
        XCTAssertEqual(try ledger.inboxDepth(), InboxDepth(pending: 0, retrying: 0, parked: 1))
        XCTAssertEqual(try ledger.parkedEntries(limit: 10),
                       [ParkedInboxEntry(bundleId: app, id: "poison", notificationType: "DID_RENEW",
                                         attempts: policy.maxAttempts, lastErrorCode: "INVALID_FIELD_TYPE")])

        XCTAssertEqual(try ledger.markForReplay(bundleId: app, since: t0), 1)
        XCTAssertEqual(try drain(ledger, now: now), ProcessReport(processed: 1))
        XCTAssertEqual(try ledger.parkedEntries(limit: 10), [])
    }

    /// A chain whose stored state cannot be read fails its own entries, each in its savepoint: the
    /// batch's other chains apply, and the entry is counted, retried and parked like any failure
    /// (not the whole batch refused again on every pass).
    func testUndecodableStoredStateFailsOnlyItsChainsEntryWhichIsParkedAfterItsAttempts() throws {
        let ledger = try openLedger()
        for (index, chain) in ["c-good", "c-corrupt"].enumerated() {
            XCTAssertTrue(try ledger.enqueue(entry("first-\(chain)", signedDate: t0 + Int64(index), chain: chain)))
        }
        XCTAssertEqual(try drain(ledger, now: t0).processed, 2)
        try ledger.database.withConnection { (connection) throws(VerificationError) in
            _ = try connection.run("UPDATE subscription_states SET state_json = '{' WHERE original_transaction_id = ?",
                                   .text("c-corrupt"))
        }
        for (index, chain) in ["c-corrupt", "c-good", "c-new"].enumerated() {
            XCTAssertTrue(try ledger.enqueue(entry("next-\(chain)", signedDate: t0 + 10 + Int64(index), chain: chain)))
        }
        var applied: [String] = []
        XCTAssertEqual(try drain(ledger, now: t0 + 20, applied: &applied), ProcessReport(processed: 2, failed: 1))
        XCTAssertEqual(applied, ["next-c-good", "next-c-new"])
        XCTAssertEqual(try ledger.subscriptionState(bundleId: app, originalTransactionId: "c-good")?.lastSignedDate, t0 + 11)
        XCTAssertEqual(try count(ledger, "SELECT attempts FROM notification_inbox WHERE notification_id = 'next-c-corrupt'"), 1)

        let policy = InboxRetryPolicy.standard
        var parked = 0
        for attempt in 1..<policy.maxAttempts {
            parked += try drain(ledger, now: t0 + 20 + Int64(attempt) * policy.maxDelayMillis).parked
        }
        XCTAssertEqual(parked, 1)
        XCTAssertEqual(try ledger.parkedEntries(limit: 10).map(\.id), ["next-c-corrupt"])
    }

    func testAnotherLedgerOnTheFileFindsPendingEntriesPendingAndProcessedOnesDone() throws {
        let first = try openLedger()
        for index in 0..<4 { XCTAssertTrue(try first.enqueue(entry("n-\(index)", signedDate: t0 + Int64(index)))) }
        var applied: [String] = []
        XCTAssertEqual(try drain(first, limit: 2, applied: &applied).processed, 2)

        // As after a restart mid-drain: the other instance sees the same queue and finishes it.
        let second = try openLedger()
        XCTAssertEqual(try second.inboxDepth().pending, 2)
        XCTAssertEqual(try drain(second, applied: &applied).processed, 2)
        XCTAssertEqual(try drain(first, applied: &applied).processed, 0)
        XCTAssertEqual(applied, ["n-0", "n-1", "n-2", "n-3"])
        XCTAssertEqual(try second.outboxDepth(), 4)
    }

    func testBoundOwnersEntitlementFollowsTheChainsState() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000")],
                                   entitlements: [entitlement("alice", original: "1000")], now: t0))
        XCTAssertTrue(try ledger.enqueue(entry("revoke", signedDate: t0 + day, type: "REVOKE")))
        try drain(ledger, now: t0 + day)

        XCTAssertEqual(try ledger.entitlements(bundleId: app, account: "alice"),
                       [Entitlement(account: "alice", productId: "com.example.pro", state: .revoked,
                                    expiresDate: t0 + 31 * day, originalTransactionId: "1000", source: "notification")])
    }

    func testChainNotYetClaimedGetsStateButNoEntitlement() throws {
        let ledger = try openLedger()
        XCTAssertTrue(try ledger.enqueue(entry("n-1", signedDate: t0)))
        try drain(ledger)
        XCTAssertNotNil(try ledger.subscriptionState(bundleId: app, originalTransactionId: "1000"))
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM entitlements"), 0)
    }

    func testNotificationSignedBeforeAClaimDoesNotOverwriteTheClaimsEntitlement() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000")],
                                   entitlements: [entitlement("alice", original: "1000")], now: t0))
        XCTAssertTrue(try ledger.enqueue(entry("late-revoke", signedDate: t0 - 1, type: "REVOKE")))
        try drain(ledger, now: t0 + day)

        XCTAssertEqual(try ledger.entitlements(bundleId: app, account: "alice"), [entitlement("alice", original: "1000")])
        XCTAssertEqual(try ledger.subscriptionState(bundleId: app, originalTransactionId: "1000")?.state, .revoked)
    }

    func testUnknownTypesAreCountedOncePerNotificationEvenWhenReplayed() throws {
        let ledger = try openLedger()
        XCTAssertTrue(try ledger.enqueue(entry("u-1", signedDate: t0, type: "NEW_FANCY_TYPE")))
        XCTAssertTrue(try ledger.enqueue(entry("u-2", signedDate: t0 + 1, type: "NEW_FANCY_TYPE")))
        XCTAssertTrue(try ledger.enqueue(entry("k-1", signedDate: t0 + 2)))
        XCTAssertEqual(try drain(ledger), ProcessReport(processed: 3, unknown: 2))
        try ledger.markForReplay(bundleId: app, since: 0)
        try drain(ledger)

        XCTAssertEqual(try ledger.unknownNotificationCounts(),
                       [UnknownNotificationCount(bundleId: app, notificationType: "NEW_FANCY_TYPE", subtype: nil, count: 2)])
    }

    func testConsumptionRequestIsRecordedUntilAnswered() throws {
        let ledger = try openLedger()
        let request = entry("cr-1", signedDate: t0, type: "CONSUMPTION_REQUEST")
        XCTAssertTrue(try ledger.enqueue(request))
        _ = try ledger.processPending(limit: 10, now: t0 + 1) { (entry, _) throws(VerificationError) in
            LifecycleOutcome(newState: nil,
                             webhooks: [webhook(for: entry, chain: "1000", state: nil, kind: .consumptionRequested)])
        }
        let window = 12 * 3_600_000 as Int64
        XCTAssertEqual(try ledger.pendingConsumptionRequests(notBefore: t0 + 1 - window, limit: 10),
                       [ConsumptionRequest(bundleId: app, transactionId: "t-cr-1", originalTransactionId: "1000",
                                           requestedAt: t0)])
        XCTAssertEqual(try ledger.pendingConsumptionRequests(notBefore: t0 + 1, limit: 10), [])

        XCTAssertTrue(try ledger.markConsumptionAnswered(bundleId: app, transactionId: "t-cr-1", at: t0 + 2))
        XCTAssertFalse(try ledger.markConsumptionAnswered(bundleId: app, transactionId: "t-cr-1", at: t0 + 3))
        XCTAssertEqual(try ledger.pendingConsumptionRequests(notBefore: 0, limit: 10), [])
    }

    func testRetryDelayDoublesFromTheBaseAndIsCapped() {
        let policy = InboxRetryPolicy(maxAttempts: 5, baseDelayMillis: 1_000, maxDelayMillis: 10_000)
        XCTAssertEqual((1...6).map(policy.delay(afterAttempts:)), [1_000, 2_000, 4_000, 8_000, 10_000, 10_000])
        XCTAssertEqual(policy.delay(afterAttempts: 1_000), 10_000)
    }
}
