import Foundation
import IAPCore
import Synchronization
import XCTest
@testable import Ledger

/// Concurrent deliveries through `AsyncSQLLedger.enqueue`: queued for a writer that inserts them in
/// batches (`BatchedWriter`), each answered only after its batch committed, with its own outcome.
final class InboxWriterTests: InboxTestCase {
    /// Holds the engine's write slots in transactions of their own until `ready()`, then returns.
    private func holdWrites(_ ledger: SQLLedger, until ready: @escaping @Sendable () -> Bool) throws -> DispatchGroup {
        let writes = try XCTUnwrap((ledger.database as? any GroupCommittingDatabase)?.writes)
        let held = DispatchGroup()
        for _ in 0..<writes.batchesInFlight {
            let holding = DispatchSemaphore(value: 0)
            held.enter()
            Thread.detachNewThread {
                _ = try? ledger.database.transaction { (_) throws(VerificationError) in
                    holding.signal()
                    let deadline = Date().addingTimeInterval(5)
                    while !ready(), Date() < deadline { usleep(1_000) }
                }
                held.leave()
            }
            holding.wait()
        }
        return held
    }

    /// A ledger whose one write slot is held until `total` calls wait in its writer (SQLite's single
    /// batch at a time), and the COMMITs since, the holder's included.
    private func heldUntilQueued(_ total: Int) throws
        -> (SQLLedger, AsyncSQLLedger, committed: () -> Int, held: DispatchGroup) {
        try XCTSkipIf(usesPostgres, "PostgreSQL runs several batches side by side: the single-batch count is SQLite's")
        let ledger = try openLedger()
        // The callers' deadline is well past the holder's 5 s: a batch that never fills fails the
        // counts below, never a race between the holder's release and the callers' deadlines.
        let async = AsyncSQLLedger(ledger, deadline: .seconds(30))
        let writes = try XCTUnwrap((ledger.database as? any GroupCommittingDatabase)?.writes)
        let before = writes.commits
        let held = try holdWrites(ledger) { async.writer.waitingCalls >= total }
        return (ledger, async, { writes.commits - before }, held)
    }

    /// "inserted", "duplicate", or the code of the failure.
    private static func outcome(_ ledger: AsyncSQLLedger, _ entry: InboxEntry) async -> String {
        do throws(VerificationError) {
            return try await ledger.enqueue(entry) ? "inserted" : "duplicate"
        } catch {
            return error.code.rawValue
        }
    }

    /// A burst of 100 deliveries (more than the 32 storage threads that each took one before) while
    /// a commit is slow: one batch after it, not one per thread; duplicates of one notification
    /// insert it once, and an entry the ledger refuses fails alone.
    func testABurstOfDeliveriesIsCommittedTogetherEachWithItsOwnAnswer() async throws {
        let distinct = 90, duplicates = 9
        // The refused entry is refused before it queues: 99 calls wait, not 100.
        let (ledger, async, committed, held) = try heldUntilQueued(distinct + duplicates)
        let refused = {
            var entry = entry("bad", signedDate: t0)
            entry.version = "3"
            return entry
        }()
        let results = await withTaskGroup(of: (String, String).self) { group in
            for index in 0..<distinct {
                let entry = entry("n\(index)", signedDate: t0 + Int64(index))
                group.addTask { (entry.id, await Self.outcome(async, entry)) }
            }
            for index in 0..<duplicates {
                let entry = entry("dup", signedDate: t0, receivedAt: t0 + Int64(index))
                group.addTask { ("dup", await Self.outcome(async, entry)) }
            }
            group.addTask { ("bad", await Self.outcome(async, refused)) }
            return await group.reduce(into: [(String, String)]()) { $0.append($1) }
        }
        XCTAssertEqual(held.wait(timeout: .now() + 10), .success)

        let inserted: [String] = results.filter { $0.0.hasPrefix("n") }.map(\.1)
        XCTAssertEqual(inserted, Array(repeating: "inserted", count: distinct))
        let repeated: [String] = results.filter { $0.0 == "dup" }.map(\.1).sorted()
        XCTAssertEqual(repeated, Array(repeating: "duplicate", count: duplicates - 1) + ["inserted"])
        XCTAssertEqual(results.first { $0.0 == "bad" }?.1, VerificationError.Code.internalError.rawValue)
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM notification_inbox"), Int64(distinct + 1))
        // The holder's commit, the first writer's (it took its batch before the rest arrived), one
        // for all the others; a storage thread per delivery committed 32 at most at a time.
        XCTAssertLessThanOrEqual(committed(), 3)
        XCTAssertEqual(async.writer.waitingCalls, 0)
    }

    /// POST /verify's claims take the same writer: a burst of 100 while a commit is slow is one
    /// batch after it (a storage thread per claim committed 32 at most at a time, four batches or
    /// more), each answered with its own outcome: ten accounts racing for one purchase leave one
    /// owner and nine refusals, each refusal rolled back alone.
    func testABurstOfClaimsIsCommittedTogetherEachWithItsOwnAnswer() async throws {
        let distinct = 90, racing = 10
        let (ledger, async, committed, held) = try heldUntilQueued(distinct + racing)
        let claims = (0..<distinct).map { claim("buyer\($0)", [transaction("p\($0)", original: "p\($0)")]) }
            + (0..<racing).map { claim("racer\($0)", [transaction("shared", original: "shared")]) }
        let results = await withTaskGroup(of: (String, String).self) { group in
            for claim in claims {
                group.addTask {
                    do throws(VerificationError) {
                        let outcome = try await async.claim(claim)
                        return (claim.account, outcome.newlyGranted.joined(separator: ","))
                    } catch {
                        return (claim.account, error.code.rawValue)
                    }
                }
            }
            return await group.reduce(into: [String: String]()) { $0[$1.0] = $1.1 }
        }
        XCTAssertEqual(held.wait(timeout: .now() + 10), .success)

        for index in 0..<distinct { XCTAssertEqual(results["buyer\(index)"], "p\(index)") }
        let raced = (0..<racing).compactMap { results["racer\($0)"] }.sorted()
        let refusal = VerificationError.Code.transactionBoundToOtherAccount.rawValue
        XCTAssertEqual(raced, Array(repeating: refusal, count: racing - 1) + ["shared"])
        let winner = (0..<racing).map { "racer\($0)" }.first { results[$0] == "shared" }
        XCTAssertEqual(try ledger.owner(bundleId: "com.example.app", originalTransactionId: "shared"), winner)
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM ownership"), Int64(distinct + 1))
        // The holder's commit, the first writer's (it took its batch before the rest arrived), one for the others.
        XCTAssertLessThanOrEqual(committed(), 3)
        XCTAssertEqual(async.writer.waitingCalls, 0)
    }

    /// Each delivery still waits with the storage deadline: a writer stuck behind a commit that does
    /// not end leaves its deliveries answered `STORAGE_UNAVAILABLE` in time; then the writer goes on.
    func testDeliveriesBehindAStuckCommitAreAnsweredUnavailableWithinTheDeadline() async throws {
        try XCTSkipIf(usesPostgres, "the stuck commit is SQLite's one write slot")
        let ledger = try openLedger()
        let async = AsyncSQLLedger(ledger, deadline: .milliseconds(300))
        let release = Atomic<Bool>(false)
        let held = try holdWrites(ledger) { release.load(ordering: .sequentiallyConsistent) }
        let started = ContinuousClock.now
        let codes = await withTaskGroup(of: VerificationError.Code?.self) { group in
            for index in 0..<5 {
                let entry = entry("late\(index)", signedDate: t0 + Int64(index))
                group.addTask {
                    do throws(VerificationError) {
                        _ = try await async.enqueue(entry)
                        return nil
                    } catch {
                        return error.code
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5))
        XCTAssertEqual(codes, Array(repeating: .storageUnavailable, count: 5))
        release.store(true, ordering: .sequentiallyConsistent)
        XCTAssertEqual(held.wait(timeout: .now() + 10), .success)
        // Those a writer had taken may still be written once the storage is back (as a storage call
        // a thread had taken still runs): harmless, Apple's retry is then a duplicate.
        let after = await Self.outcome(async, entry("after", signedDate: t0))
        XCTAssertEqual(after, "inserted")
    }
}
