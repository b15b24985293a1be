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

    /// Holds the connection in a transaction of its own until `count` write calls wait behind it,
    /// so that they form one batch once it commits; returns once it holds the connection.
    private func holdConnection(_ ledger: SQLLedger, until count: Int, then: @escaping @Sendable () -> Void) throws {
        let writes = try grouped(ledger)
        let holding = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = try? ledger.database.transaction { (_) throws(VerificationError) in
                holding.signal()
                let deadline = Date().addingTimeInterval(5)
                while writes.waitingWrites < count, Date() < deadline { usleep(1_000) }
            }
            then()
        }
        holding.wait()
    }

    func testConcurrentInboxInsertsShareOneCommit() throws {
        let ledger = try openLedger()
        let writes = try grouped(ledger)
        let before = writes.commits
        let roundTripsBefore = (ledger.database as? PostgresDatabase)?.roundTrips.total
        let callers = 15
        let done = DispatchGroup()
        let results = Mutex<[Bool]>([])
        done.enter()
        try holdConnection(ledger, until: callers) { done.leave() }
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
        // The holder's commit, then one for all fifteen inserts (sixteen without group commit).
        XCTAssertEqual(writes.commits - before, 2)
        if let roundTripsBefore, let roundTripsAfter {
            // One round trip per insert (its SAVEPOINT, and the RELEASE of the one before, go in one
            // pipeline with it), BEGIN and COMMIT per batch, preparing the INSERT once: not three each.
            XCTAssertLessThanOrEqual(roundTripsAfter - roundTripsBefore, callers + 6)
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
        XCTAssertEqual(writes.commits - before, 2)
    }
}
