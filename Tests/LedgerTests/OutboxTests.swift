import Foundation
@testable import IAPCore
import Synchronization
import XCTest
@testable import Ledger

/// The webhook outbox: once per idempotency key, due after backoff, never again once delivered.
final class OutboxTests: InboxTestCase {
    /// An event of its own chain unless `chain` names one: the lease tests are about leases, the
    /// chain tests about one chain's order.
    private func event(_ key: String, bundleId: String? = nil, at time: Int64 = 0, chain: String? = nil) -> WebhookEvent {
        WebhookEvent(kind: .entitlementChanged, idempotencyKey: key, bundleId: bundleId ?? app,
                     originalTransactionId: chain ?? "chain-\(key)", transactionId: "1001", productId: "com.example.pro", state: .active,
                     expiresDate: t0 + 30 * day, notificationType: "DID_RENEW", subtype: "BILLING_RECOVERY",
                     occurredAt: t0 + time)
    }

    func testQueuedEventIsReadBackExactlyWithItsSchedule() throws {
        let ledger = try openLedger()
        XCTAssertEqual(try ledger.enqueueWebhooks([event("k-1")], now: t0), 1)
        let due = try ledger.dueWebhooks(now: t0, limit: 10)
        XCTAssertEqual(due.map(\.event), [event("k-1")])
        XCTAssertEqual(due.first?.attempts, 0)
        XCTAssertEqual(due.first?.nextAttemptAt, t0)
    }

    func testEventWithAKeyAlreadyQueuedIsNotQueuedTwice() throws {
        let ledger = try openLedger()
        XCTAssertEqual(try ledger.enqueueWebhooks([event("k-1"), event("k-1", at: 5)], now: t0), 1)
        XCTAssertEqual(try ledger.enqueueWebhooks([event("k-1", at: 9), event("k-2")], now: t0 + 1), 1)
        XCTAssertEqual(try ledger.outboxDepth(), 2)
        XCTAssertEqual(try ledger.dueWebhooks(now: t0 + 1, limit: 10).map(\.event.occurredAt), [t0, t0])
    }

    func testSameKeyOfAnotherAppIsADifferentEvent() throws {
        let ledger = try openLedger()
        XCTAssertEqual(try ledger.enqueueWebhooks([event("k-1"), event("k-1", bundleId: "com.example.other")], now: t0), 2)
    }

    func testEventWithoutAKeyIsRefusedAndNothingOfTheBatchIsQueued() throws {
        let ledger = try openLedger()
        XCTAssertEqual(errorCode { () throws(VerificationError) in
            _ = try ledger.enqueueWebhooks([event("k-1"), event("")], now: t0)
        }, .internalError)
        XCTAssertEqual(try ledger.outboxDepth(), 0)
    }

    func testFailedEventIsDueAgainOnlyFromItsNextAttempt() throws {
        let ledger = try openLedger()
        try ledger.enqueueWebhooks([event("k-1")], now: t0)
        let seq = try XCTUnwrap(ledger.dueWebhooks(now: t0, limit: 1).first?.seq)
        try ledger.markFailed(seq, nextAttemptAt: t0 + 2_000)

        XCTAssertEqual(try ledger.dueWebhooks(now: t0 + 1_999, limit: 10), [])
        let retry = try ledger.dueWebhooks(now: t0 + 2_000, limit: 10)
        XCTAssertEqual(retry.map(\.seq), [seq])
        XCTAssertEqual(retry.first?.attempts, 1)
        XCTAssertEqual(try ledger.outboxDepth(), 1)
    }

    func testDeliveredEventIsNeverDueAgainNorQueuedAgain() throws {
        let ledger = try openLedger()
        try ledger.enqueueWebhooks([event("k-1")], now: t0)
        let seq = try XCTUnwrap(ledger.dueWebhooks(now: t0, limit: 1).first?.seq)
        try ledger.markDelivered(seq, at: t0 + 1)
        // A late failure report from a slow sender must not revive it.
        try ledger.markFailed(seq, nextAttemptAt: t0 + 2)

        XCTAssertEqual(try ledger.dueWebhooks(now: t0 + day, limit: 10), [])
        XCTAssertEqual(try ledger.outboxDepth(), 0)
        XCTAssertEqual(try ledger.enqueueWebhooks([event("k-1")], now: t0 + 3), 0)
        XCTAssertEqual(try ledger.dueWebhooks(now: t0 + day, limit: 10), [])
    }

    func testDueEventsComeEarliestFirstWithinTheLimit() throws {
        let ledger = try openLedger()
        try ledger.enqueueWebhooks([event("a"), event("b"), event("c")], now: t0)
        let seqs = try ledger.dueWebhooks(now: t0, limit: 10).map(\.seq)
        try ledger.markFailed(seqs[0], nextAttemptAt: t0 + 100)

        XCTAssertEqual(try ledger.dueWebhooks(now: t0 + 100, limit: 2).map(\.event.idempotencyKey), ["b", "c"])
        XCTAssertEqual(try ledger.dueWebhooks(now: t0 + 100, limit: 10).map(\.event.idempotencyKey), ["b", "c", "a"])
    }

    func testEventsOfAReplayedNotificationAreNotQueuedAgain() throws {
        let ledger = try openLedger()
        XCTAssertTrue(try ledger.enqueue(entry("n-1", signedDate: t0)))
        try drain(ledger)
        let seq = try XCTUnwrap(ledger.dueWebhooks(now: t0 + day, limit: 1).first?.seq)
        try ledger.markDelivered(seq, at: t0 + day)

        try ledger.markForReplay(bundleId: app, since: 0)
        XCTAssertEqual(try drain(ledger).processed, 1)
        XCTAssertEqual(try ledger.outboxDepth(), 0)
    }

    func testLeasedEventsAreNotDueForAnyoneElseUntilTheLeaseRunsOut() throws {
        let ledger = try openLedger()
        try ledger.enqueueWebhooks([event("k-1"), event("k-2"), event("k-3")], now: t0)
        let first = try ledger.leaseDueWebhooks(now: t0, limit: 2, leaseMillis: 60_000, holder: "a")
        XCTAssertEqual(first.map(\.event.idempotencyKey), ["k-1", "k-2"])
        let second = try ledger.leaseDueWebhooks(now: t0 + 1, limit: 10, leaseMillis: 60_000, holder: "b")
        XCTAssertEqual(second.map(\.event.idempotencyKey), ["k-3"], "a second deliverer gets only what nobody holds")
        XCTAssertEqual(try ledger.leaseDueWebhooks(now: t0 + 2, limit: 10, leaseMillis: 60_000, holder: "b"), [])

        // The first deliverer died without marking anything: its events come back after the lease.
        try ledger.markDelivered(second[0].seq, at: t0 + 3)
        let retaken = try ledger.leaseDueWebhooks(now: t0 + 60_000, limit: 10, leaseMillis: 60_000, holder: "c")
        XCTAssertEqual(retaken.map(\.event.idempotencyKey), ["k-1", "k-2"])
        XCTAssertEqual(try ledger.outboxDepth(), 2)
    }

    func testLeasedEventMarkedFailedIsDueAtItsBackoffNotAtTheLeaseEnd() throws {
        let ledger = try openLedger()
        try ledger.enqueueWebhooks([event("k-1")], now: t0)
        let seq = try XCTUnwrap(ledger.leaseDueWebhooks(now: t0, limit: 1, leaseMillis: 600_000, holder: "a").first?.seq)
        try ledger.markFailed(seq, nextAttemptAt: t0 + 1_000)
        XCTAssertEqual(try ledger.leaseDueWebhooks(now: t0 + 1_000, limit: 1, leaseMillis: 600_000, holder: "a").map(\.seq), [seq])
    }

    /// Issue 10 item 7: a lease is short and renewed by its holder while it delivers; once another
    /// holder took an event (the lease ran out meanwhile), the first can no longer renew it.
    func testOnlyTheHolderRenewsALeaseAndAnEventTakenByAnotherHolderIsLostToTheFirst() throws {
        let ledger = try openLedger()
        try ledger.enqueueWebhooks([event("k-1"), event("k-2"), event("k-3")], now: t0)
        let batch = try ledger.leaseDueWebhooks(now: t0, limit: 3, leaseMillis: 10_000, holder: "a").map(\.seq)
        XCTAssertEqual(try ledger.renewWebhookLeases(batch, holder: "b", until: t0 + 20_000), [], "not b's")
        try ledger.markDelivered(batch[0], at: t0 + 1)
        try ledger.markFailed(batch[1], nextAttemptAt: t0 + 60_000)
        XCTAssertEqual(try ledger.renewWebhookLeases(batch, holder: "a", until: t0 + 20_000), [batch[2]],
                       "only what is still leased: neither the delivered nor the failed event")
        XCTAssertEqual(try ledger.leaseDueWebhooks(now: t0 + 19_999, limit: 3, leaseMillis: 10_000, holder: "b"), [],
                       "the renewed lease holds past its first end")
        // a stalls past its renewed lease; b takes the event, and a's late renewal finds it gone.
        XCTAssertEqual(try ledger.leaseDueWebhooks(now: t0 + 20_000, limit: 3, leaseMillis: 10_000, holder: "b").map(\.seq),
                       [batch[2]])
        XCTAssertEqual(try ledger.renewWebhookLeases(batch, holder: "a", until: t0 + 30_000), [])
        XCTAssertEqual(try ledger.renewWebhookLeases(batch, holder: "b", until: t0 + 30_000), [batch[2]])
    }

    /// Issue 10 item 7: an instance that restarts under its stable identity takes back at once what
    /// its previous incarnation held, and nothing else: not another holder's lease, not a backoff.
    func testReleasingAHoldersLeasesMakesOnlyItsLeasedEventsDueNow() throws {
        let ledger = try openLedger()
        try ledger.enqueueWebhooks([event("k-1"), event("k-2"), event("k-3"), event("k-4")], now: t0)
        let mine = try ledger.leaseDueWebhooks(now: t0, limit: 2, leaseMillis: 600_000, holder: "gw-1").map(\.seq)
        let theirs = try ledger.leaseDueWebhooks(now: t0, limit: 1, leaseMillis: 600_000, holder: "gw-2").map(\.seq)
        let backedOff = try XCTUnwrap(ledger.leaseDueWebhooks(now: t0, limit: 1, leaseMillis: 600_000, holder: "gw-1").first?.seq)
        try ledger.markFailed(backedOff, nextAttemptAt: t0 + 300_000)
        XCTAssertEqual(try ledger.releaseWebhookLeases(holder: "gw-1", now: t0 + 5), 2)
        XCTAssertEqual(try ledger.leaseDueWebhooks(now: t0 + 5, limit: 10, leaseMillis: 600_000, holder: "gw-1").map(\.seq), mine)
        XCTAssertFalse(mine.contains(theirs[0]))
        XCTAssertEqual(try ledger.renewWebhookLeases(theirs, holder: "gw-2", until: t0 + 700_000), Set(theirs),
                       "another live holder keeps its lease")
    }

    func testConcurrentDeliverersNeverTakeTheSameEvent() throws {
        let ledger = try openLedger()
        try ledger.enqueueWebhooks((0..<200).map { event("k-\($0)") }, now: t0)
        let taken = Mutex<[String]>([])
        let t0 = self.t0
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            while let batch = try? ledger.leaseDueWebhooks(now: t0, limit: 7, leaseMillis: 60_000, holder: "w\(worker)"), !batch.isEmpty {
                taken.withLock { $0 += batch.map(\.event.idempotencyKey) }
            }
        }
        let keys = taken.withLock { $0 }
        XCTAssertEqual(keys.count, 200)
        XCTAssertEqual(Set(keys).count, 200, "no event leased twice")
    }

    /// A chain's events are leased in order and never past an earlier one that is leased elsewhere
    /// or waits for its retry; other chains are not held back by it.
    func testAChainsEventsAreLeasedInOrderAndNeverPastAnEarlierUndeliveredOne() throws {
        let ledger = try openLedger()
        try ledger.enqueueWebhooks([event("a1", chain: "A"), event("b1", chain: "B"), event("a2", chain: "A"),
                                    event("a3", chain: "A"), event("c1")], now: t0)
        func lease(_ holder: String, at time: Int64, limit: Int = 10) throws -> [String] {
            try ledger.leaseDueWebhooks(now: time, limit: limit, leaseMillis: 60_000, holder: holder).map(\.event.idempotencyKey)
        }
        func seq(_ key: String) throws -> Int64 {
            try XCTUnwrap(ledger.dueWebhooks(now: .max, limit: 10).first { $0.event.idempotencyKey == key }?.seq)
        }
        let (a1, a2, a3) = (try seq("a1"), try seq("a2"), try seq("a3"))

        let first = try lease("h1", at: t0, limit: 1)
        let whileA1IsLeased = try lease("h2", at: t0)
        try ledger.markWebhooks([.failed(a1, nextAttemptAt: t0 + 1_000)], holder: "h1", at: t0 + 1)
        let whileA1WaitsForItsRetry = try lease("h2", at: t0 + 2)
        let onceA1IsDue = try lease("h3", at: t0 + 1_000)
        try ledger.markWebhooks([.failed(a2, nextAttemptAt: t0 + 9_000), .released(a3)], holder: "someone else",
                                at: t0 + 1_001)
        let marksOfAnotherHolderChangeNothing = try lease("h4", at: t0 + 61_000)
        try ledger.markWebhooks([.delivered(a1), .failed(a2, nextAttemptAt: t0 + 70_000), .released(a3)], holder: "h4",
                                at: t0 + 61_001)
        let behindA2sRetry = try lease("h5", at: t0 + 61_002)
        let onceA2IsDue = try lease("h5", at: t0 + 70_000)

        XCTAssertEqual(first, ["a1"])
        XCTAssertEqual(whileA1IsLeased, ["b1", "c1"], "a2 and a3 wait behind a1's lease; other chains do not")
        XCTAssertEqual(whileA1WaitsForItsRetry, [])
        XCTAssertEqual(onceA1IsDue, ["a1", "a2", "a3"], "a chain's due events together, in order")
        XCTAssertEqual(marksOfAnotherHolderChangeNothing, ["a1", "b1", "a2", "a3", "c1"],
                       "every lease ran out with nothing marked by its holder")
        XCTAssertEqual(behindA2sRetry, [], "a3 released, but a2 waits for its retry")
        XCTAssertEqual(onceA2IsDue, ["a2", "a3"])
        let stored = try ledger.dueWebhooks(now: .max, limit: 10)
        XCTAssertEqual(stored.first { $0.seq == a2 }?.attempts, 1, "only the failure counts an attempt; the release does not")
        XCTAssertEqual(stored.first { $0.seq == a3 }?.attempts, 0)
        XCTAssertEqual(try ledger.outboxDepth(), 4, "only a1 is delivered")
    }
}
