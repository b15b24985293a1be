import Foundation
import IAPCore
import Synchronization
import XCTest
@testable import Ledger

/// The webhook outbox: once per idempotency key, due after backoff, never again once delivered.
final class OutboxTests: InboxTestCase {
    private func event(_ key: String, bundleId: String? = nil, at time: Int64 = 0) -> WebhookEvent {
        WebhookEvent(kind: .entitlementChanged, idempotencyKey: key, bundleId: bundleId ?? app,
                     originalTransactionId: "1000", transactionId: "1001", productId: "com.example.pro", state: .active,
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
        let first = try ledger.leaseDueWebhooks(now: t0, limit: 2, leaseMillis: 60_000)
        XCTAssertEqual(first.map(\.event.idempotencyKey), ["k-1", "k-2"])
        let second = try ledger.leaseDueWebhooks(now: t0 + 1, limit: 10, leaseMillis: 60_000)
        XCTAssertEqual(second.map(\.event.idempotencyKey), ["k-3"], "a second deliverer gets only what nobody holds")
        XCTAssertEqual(try ledger.leaseDueWebhooks(now: t0 + 2, limit: 10, leaseMillis: 60_000), [])

        // The first deliverer died without marking anything: its events come back after the lease.
        try ledger.markDelivered(second[0].seq, at: t0 + 3)
        let retaken = try ledger.leaseDueWebhooks(now: t0 + 60_000, limit: 10, leaseMillis: 60_000)
        XCTAssertEqual(retaken.map(\.event.idempotencyKey), ["k-1", "k-2"])
        XCTAssertEqual(try ledger.outboxDepth(), 2)
    }

    func testLeasedEventMarkedFailedIsDueAtItsBackoffNotAtTheLeaseEnd() throws {
        let ledger = try openLedger()
        try ledger.enqueueWebhooks([event("k-1")], now: t0)
        let seq = try XCTUnwrap(ledger.leaseDueWebhooks(now: t0, limit: 1, leaseMillis: 600_000).first?.seq)
        try ledger.markFailed(seq, nextAttemptAt: t0 + 1_000)
        XCTAssertEqual(try ledger.leaseDueWebhooks(now: t0 + 1_000, limit: 1, leaseMillis: 600_000).map(\.seq), [seq])
    }

    func testConcurrentDeliverersNeverTakeTheSameEvent() throws {
        let ledger = try openLedger()
        try ledger.enqueueWebhooks((0..<200).map { event("k-\($0)") }, now: t0)
        let taken = Mutex<[String]>([])
        let t0 = self.t0
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            while let batch = try? ledger.leaseDueWebhooks(now: t0, limit: 7, leaseMillis: 60_000), !batch.isEmpty {
                taken.withLock { $0 += batch.map(\.event.idempotencyKey) }
            }
        }
        let keys = taken.withLock { $0 }
        XCTAssertEqual(keys.count, 200)
        XCTAssertEqual(Set(keys).count, 200, "no event leased twice")
    }
}
