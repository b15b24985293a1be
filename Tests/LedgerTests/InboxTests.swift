import Foundation
@testable import IAPCore
import XCTest
@testable import Ledger

/// Receiving: the durable write, duplicates, replay and retention.
final class InboxTests: InboxTestCase {
    func testEnqueuedEntryIsReadBackExactlyByAnotherLedgerOnTheSameFile() throws {
        let original = entry("n-1", signedDate: t0, body: #"{"signedPayload":"a.b.c"}"#)
        XCTAssertTrue(try openLedger().enqueue(original))

        let reopened = try openLedger()
        XCTAssertEqual(try reopened.inboxEntries(bundleId: app, since: 0, limit: 10), [original])
        XCTAssertEqual(try reopened.inboxDepth(), InboxDepth(pending: 1, retrying: 0, parked: 0))
    }

    func testLedgerFromBeforeNotificationsUpgradesAndKeepsItsData() throws {
        do {
            // Rows as version 1's code wrote them (today's claim writes columns version 1 lacks).
            let old = try openLedger(migrations: Array(releasedMigrations.prefix(1)))
            try old.database.transaction { (connection) throws(VerificationError) in
                try connection.run("INSERT INTO ownership (bundle_id, ownership_key, account, bound_at) VALUES (?, ?, ?, ?)",
                                   .text(app), .text("1000"), .text("alice"), .integer(t0))
                try connection.run("""
                    INSERT INTO entitlements (bundle_id, account, original_transaction_id, product_id, state,
                                              expires_date, source, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """, .text(app), .text("alice"), .text("1000"), .text("com.example.pro"), .text("active"),
                    .integer(t0 + 1_000), .text("serverAPI"), .integer(t0))
            }
        }
        let upgraded = try openLedger()
        XCTAssertEqual(try upgraded.owner(bundleId: app, originalTransactionId: "1000"), "alice")
        XCTAssertEqual(try upgraded.entitlements(bundleId: app, account: "alice"),
                       [Entitlement(account: "alice", productId: "com.example.pro", state: .active, expiresDate: t0 + 1_000,
                                    originalTransactionId: "1000", source: "serverAPI")])
        XCTAssertTrue(try upgraded.enqueue(entry("n-1", signedDate: t0)))
    }

    func testDuplicateDeliveryReturnsFalseAndChangesNothing() throws {
        let ledger = try openLedger()
        let first = entry("n-1", signedDate: t0, body: "first")
        XCTAssertTrue(try ledger.enqueue(first))
        XCTAssertFalse(try ledger.enqueue(entry("n-1", signedDate: t0 + 1, body: "second")))

        XCTAssertEqual(try ledger.inboxEntries(bundleId: app, since: 0, limit: 10), [first])
        XCTAssertEqual(try ledger.inboxDepth().pending, 1)
    }

    func testDuplicateOfAnAlreadyProcessedEntryIsNotQueuedAgain() throws {
        let ledger = try openLedger()
        XCTAssertTrue(try ledger.enqueue(entry("n-1", signedDate: t0)))
        XCTAssertEqual(try drain(ledger).processed, 1)

        XCTAssertFalse(try ledger.enqueue(entry("n-1", signedDate: t0)))
        XCTAssertEqual(try ledger.inboxDepth().pending, 0)
        XCTAssertEqual(try drain(ledger).processed, 0)
    }

    func testSameNotificationIdOfAnotherAppIsADifferentEntry() throws {
        let ledger = try openLedger()
        XCTAssertTrue(try ledger.enqueue(entry("n-1", signedDate: t0)))
        XCTAssertTrue(try ledger.enqueue(entry("n-1", signedDate: t0, bundleId: "com.example.other")))
        XCTAssertEqual(try ledger.inboxDepth().pending, 2)
    }

    func testEntryWithAVersionOtherThanOneOrTwoIsRefused() throws {
        let ledger = try openLedger()
        var bad = entry("n-1", signedDate: t0)
        bad.version = "3"
        XCTAssertEqual(errorCode { () throws(VerificationError) in _ = try ledger.enqueue(bad) }, .internalError)
        XCTAssertEqual(try ledger.inboxDepth().pending, 0)
    }

    func testEntryWithoutAnEventIsStoredAndAppliedWithNoState() throws {
        let ledger = try openLedger()
        XCTAssertTrue(try ledger.enqueue(entry("test-1", signedDate: t0, chain: nil, type: "TEST")))
        var seenStates: [SubscriptionState?] = []
        let report = try ledger.processPending(limit: 10, now: t0) { (entry, stored) throws(VerificationError) in
            XCTAssertNil(entry.event)
            seenStates.append(stored)
            return LifecycleOutcome(newState: nil)
        }
        XCTAssertEqual(report, ProcessReport(processed: 1))
        XCTAssertEqual(seenStates, [nil])
    }

    /// The drain's SQL reads an entry's chain from its stored event (to find older entries of a
    /// chain held elsewhere): it must be the chain the event names, whichever part names it.
    func testTheChainTheInboxSQLReadsIsTheChainOfTheEntrysEvent() throws {
        let ledger = try openLedger()
        var entries = [entry("original", signedDate: t0, chain: "1000"), entry("none", signedDate: t0, chain: nil, type: "TEST")]
        var first = entry("first-purchase", signedDate: t0, chain: "-")
        first.event?.transaction?.originalTransactionId = nil
        var renewal = entry("renewal-only", signedDate: t0, chain: "-")
        renewal.event?.transaction = nil
        renewal.event?.renewal = CanonicalRenewal(originalTransactionId: "3000", source: "serverAPI", mappingVersion: "serverAPI/v1")
        entries += [first, renewal]
        for entry in entries { XCTAssertTrue(try ledger.enqueue(entry)) }
        let chains = try ledger.database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT notification_id, \(SQLLedger.entryChain(connection.dialect)) FROM notification_inbox ORDER BY seq
                """) { (row) throws(VerificationError) in "\(try row.requiredText(0))=\(row.text(1) ?? "nil")" }
        }
        XCTAssertEqual(chains, entries.map { "\($0.id)=\($0.event?.originalTransactionId ?? "nil")" })
        XCTAssertEqual(chains, ["original=1000", "none=nil", "first-purchase=t-first-purchase", "renewal-only=3000"])
    }

    func testReplaySinceATimeAppliesThoseEntriesAgainAndOnlyThose() throws {
        let ledger = try openLedger()
        for (index, id) in ["old", "mid", "new"].enumerated() {
            XCTAssertTrue(try ledger.enqueue(entry(id, signedDate: t0 + Int64(index) * day)))
        }
        XCTAssertEqual(try drain(ledger).processed, 3)

        XCTAssertEqual(try ledger.markForReplay(bundleId: app, since: t0 + day), 2)
        XCTAssertEqual(try ledger.inboxDepth().pending, 2)
        var applied: [String] = []
        XCTAssertEqual(try drain(ledger, applied: &applied).processed, 2)
        XCTAssertEqual(applied, ["mid", "new"])
        // The fake machine re-applied the same facts: same state, and no webhook queued twice.
        XCTAssertEqual(try ledger.subscriptionState(bundleId: app, originalTransactionId: "1000")?.lastSignedDate,
                       t0 + 2 * day)
        XCTAssertEqual(try ledger.outboxDepth(), 3)
    }

    func testReplayOfAnotherAppLeavesThisAppsEntriesProcessed() throws {
        let ledger = try openLedger()
        XCTAssertTrue(try ledger.enqueue(entry("n-1", signedDate: t0)))
        try drain(ledger)
        XCTAssertEqual(try ledger.markForReplay(bundleId: "com.example.other", since: 0), 0)
        XCTAssertEqual(try ledger.inboxDepth().pending, 0)
    }

    func testPurgeDropsOldBodiesButKeepsTheRowsAndTheirEvents() throws {
        let ledger = try openLedger()
        let old = entry("old", signedDate: t0, receivedAt: t0)
        let recent = entry("recent", signedDate: t0 + day, receivedAt: t0 + day)
        XCTAssertTrue(try ledger.enqueue(old))
        XCTAssertTrue(try ledger.enqueue(recent))

        XCTAssertEqual(try ledger.purgeRawBodies(olderThan: t0 + 1), 1)
        XCTAssertEqual(try ledger.purgeRawBodies(olderThan: t0 + 1), 0)

        let stored = try ledger.inboxEntries(bundleId: app, since: 0, limit: 10)
        XCTAssertEqual(stored.map(\.id), ["old", "recent"])
        XCTAssertEqual(stored[0].rawBody, Data())
        XCTAssertEqual(stored[0].event, old.event)
        XCTAssertEqual(stored[1].rawBody, recent.rawBody)
        // A purged entry can still be processed and replayed: processing reads the event, not the body.
        XCTAssertEqual(try drain(ledger).processed, 2)
    }

    func testInboxEntriesListsFromATimeInSignedOrderWithinTheLimit() throws {
        let ledger = try openLedger()
        for (id, offset) in [("c", 3), ("a", 1), ("b", 2), ("z", 0)] {
            XCTAssertTrue(try ledger.enqueue(entry(id, signedDate: t0 + Int64(offset))))
        }
        XCTAssertEqual(try ledger.inboxEntries(bundleId: app, since: t0 + 1, limit: 2).map(\.id), ["a", "b"])
        XCTAssertEqual(try ledger.inboxEntries(bundleId: "com.example.other", since: 0, limit: 10), [])
    }
}
