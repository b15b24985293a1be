import Foundation
import IAPCore
import Synchronization
import XCTest
@testable import Ledger

/// Group commit, on whichever engine the suite runs (SQLite, or PostgreSQL with
/// `IAPGW_TEST_POSTGRES_URL`): write calls waiting while one commits share the next transaction and
/// its one COMMIT (one WAL flush), each in a savepoint of its own.
final class GroupCommitTests: InboxTestCase {
    private func grouped(_ ledger: SQLLedger) throws -> GroupCommit {
        try XCTUnwrap((ledger.database as? any GroupCommittingDatabase)?.writes, "the engine does not group-commit")
    }

    /// Holds every batch slot in a transaction of its own until `count` write calls wait behind them,
    /// so that they form one batch (or one per slot) once they commit; returns once they hold them.
    private func holdConnection(_ ledger: SQLLedger, until count: Int, then: @escaping @Sendable () -> Void) throws {
        let writes = try grouped(ledger)
        let holding = DispatchSemaphore(value: 0)
        let held = DispatchGroup()
        // Set by the first holder to see them all waiting: the first to commit takes them from the queue.
        let released = Atomic<Bool>(false)
        // One transaction per batch the engine runs at once, so that every later call waits.
        for _ in 0..<writes.batchesInFlight {
            held.enter()
            Thread.detachNewThread {
                _ = try? ledger.database.transaction { (_) throws(VerificationError) in
                    holding.signal()
                    let deadline = Date().addingTimeInterval(5)
                    while !released.load(ordering: .sequentiallyConsistent), Date() < deadline {
                        if writes.waitingWrites >= count { released.store(true, ordering: .sequentiallyConsistent) }
                        usleep(1_000)
                    }
                }
                held.leave()
            }
            holding.wait()
        }
        held.notify(queue: .global(), execute: then)
    }

    func testConcurrentInboxInsertsShareOneCommit() throws {
        let ledger = try openLedger()
        let writes = try grouped(ledger)
        let before = writes.commits
        let callers = 15
        let done = DispatchGroup()
        let results = Mutex<[Bool]>([])
        done.enter()
        try holdConnection(ledger, until: callers) { done.leave() }
        // Counted once the holders have their connections (opening one costs round trips of its own).
        let roundTripsBefore = (ledger.database as? PostgresDatabase)?.roundTrips.total
        for index in 0..<callers {
            let entry = entry("n\(index)", signedDate: t0 + Int64(index))
            done.enter()
            Thread.detachNewThread {
                let inserted = (try? ledger.enqueue(entry)) ?? false
                results.withLock { $0.append(inserted) }
                done.leave()
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        let roundTripsAfter = (ledger.database as? PostgresDatabase)?.roundTrips.total
        XCTAssertEqual(results.withLock { $0 }, Array(repeating: true, count: callers))
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM notification_inbox"), Int64(callers))
        // The holders' commits, then one for all fifteen inserts, or one per batch in flight (on
        // SQLite 2 in all; fifteen more than the holders' without group commit).
        assertFewCommits(writes.commits - before, writes)
        if let roundTripsBefore, let roundTripsAfter {
            // One round trip per insert (its SAVEPOINT, and the RELEASE of the one before, go in one
            // pipeline with it); per batch (at most one per slot) BEGIN, COMMIT and preparing the
            // INSERT on its connection; each holder's COMMIT: not three round trips per insert.
            XCTAssertLessThanOrEqual(roundTripsAfter - roundTripsBefore, callers + 4 * writes.batchesInFlight)
        }
    }

    func testAFailingCallOfABatchIsRolledBackAloneAndTheOthersCommit() throws {
        let ledger = try openLedger()
        let writes = try grouped(ledger)
        let before = writes.commits
        let done = DispatchGroup()
        let outcomes = Mutex<[String: String]>([:])
        done.enter()
        try holdConnection(ledger, until: 3) { done.leave() }
        for id in ["before", "after"] {
            let entry = entry(id, signedDate: t0)
            done.enter()
            Thread.detachNewThread {
                let inserted = (try? ledger.enqueue(entry)) ?? false
                outcomes.withLock { $0[id] = inserted ? "inserted" : "failed" }
                done.leave()
            }
            if id == "before" {
                // The failing call sits between the two inserts in the batch.
                done.enter()
                Thread.detachNewThread {
                    do throws(VerificationError) {
                        _ = try ledger.database.transaction { (connection) throws(VerificationError) in
                            try connection.run("""
                                INSERT INTO nonces (value_sha256, bundle_id, account, issued_at, expires_at)
                                VALUES ('doomed', 'com.example.app', 'alice', 1, 2)
                                """)
                            throw VerificationError(.internalError, "refused after writing")
                        }
                        outcomes.withLock { $0["doomed"] = "committed" }
                    } catch {
                        outcomes.withLock { $0["doomed"] = error.message }
                    }
                    done.leave()
                }
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(outcomes.withLock { $0 }, ["before": "inserted", "after": "inserted", "doomed": "refused after writing"])
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM nonces WHERE value_sha256 = 'doomed'"), 0)
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM notification_inbox"), 2)
        assertFewCommits(writes.commits - before, writes)
    }

    private func assertFewCommits(_ commits: Int, _ writes: GroupCommit, line: UInt = #line) {
        let holders = writes.batchesInFlight
        XCTAssertGreaterThan(commits, holders, line: line)
        XCTAssertLessThanOrEqual(commits, 2 * holders, line: line)
    }
}
