import Dispatch
import Foundation
import IAPCore
import XCTest
@testable import Ledger

/// A storage answer of "unavailable" means the work did not commit and never will: a write whose
/// caller was answered at its deadline is rolled back before its COMMIT, and a write whose COMMIT
/// is on its way is answered by that commit, not by the deadline. On whichever engine the suite runs.
final class CommitHoldTests: LedgerTestCase {
    private func leaseRows(_ ledger: SQLLedger, named name: String) throws -> Int {
        let counts = try ledger.database.withConnection { (connection) throws(VerificationError) -> [Int64] in
            try connection.query("SELECT count(*) FROM leases WHERE name = ?", .text(name)) { (row) throws(VerificationError) -> Int64 in
                try row.requiredInteger(0)
            }
        }
        return Int(counts.first ?? 0)
    }

    private func waitUntilWritten(_ ledger: AsyncSQLLedger) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while ledger.writer.waitingCalls > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        XCTAssertEqual(ledger.writer.waitingCalls, 0, "the batch ended")
    }

    func testAWriteWhoseCallerWasAnsweredAtItsDeadlineIsRolledBackAndNeverCommits() async throws {
        let ledger = AsyncSQLLedger(try openLedger(), deadline: .milliseconds(300))
        let name = "late-\(UUID().uuidString)"
        var refused: VerificationError?
        do {
            try await ledger.writer.write { (connection) throws(VerificationError) in
                try connection.run("INSERT INTO leases (name, holder, expires_at) VALUES (?, 'test', 0)", .text(name))
                // The engine slower than the caller's deadline (a stalled disk, a frozen server).
                usleep(800_000)
            }
        } catch {
            refused = error
        }
        XCTAssertEqual(refused?.code, .storageUnavailable)
        try await waitUntilWritten(ledger)
        XCTAssertEqual(try leaseRows(ledger.ledger, named: name), 0, "answered 503, so it must not have committed")

        // The writer goes on: the next call within its deadline commits.
        let next = "next-\(UUID().uuidString)"
        try await ledger.writer.write { (connection) throws(VerificationError) in
            try connection.run("INSERT INTO leases (name, holder, expires_at) VALUES (?, 'test', 0)", .text(next))
        }
        XCTAssertEqual(try leaseRows(ledger.ledger, named: next), 1)
    }

    func testTheOtherCallsOfABatchWhoseOneCallerWasAnsweredStillCommit() async throws {
        let ledger = AsyncSQLLedger(try openLedger(), deadline: .milliseconds(400))
        let (late, onTime) = ("late-\(UUID().uuidString)", "on-time-\(UUID().uuidString)")
        let slow = Task { () -> VerificationError? in
            do {
                try await ledger.writer.write(deadline: .milliseconds(100)) { (connection) throws(VerificationError) in
                    try connection.run("INSERT INTO leases (name, holder, expires_at) VALUES (?, 'test', 0)", .text(late))
                    usleep(250_000)
                }
                return nil
            } catch let error as VerificationError {
                return error
            } catch {
                return VerificationError(.internalError, "\(error)")
            }
        }
        // Queued while the slow call runs: it joins the same batch or the next one.
        try await Task.sleep(for: .milliseconds(30))
        try await ledger.writer.write { (connection) throws(VerificationError) in
            try connection.run("INSERT INTO leases (name, holder, expires_at) VALUES (?, 'test', 0)", .text(onTime))
        }
        let refused = await slow.value
        XCTAssertEqual(refused?.code, .storageUnavailable)
        try await waitUntilWritten(ledger)
        XCTAssertEqual(try leaseRows(ledger.ledger, named: late), 0)
        XCTAssertEqual(try leaseRows(ledger.ledger, named: onTime), 1, "answered 200 only once committed")
    }

    func testAnAnswerHeldForItsCommitIsTheCommitsNotTheDeadlines() async throws {
        let executor = StorageExecutor(limits: .init(threads: 1, deadline: .milliseconds(100), commitWait: .seconds(5)))
        let value = try await executor.awaitAnswer { (answer: FirstAnswer<Result<Int, VerificationError>>) in
            XCTAssertTrue(answer.holdForCommit())
            Thread.detachNewThread {
                usleep(400_000)  // a COMMIT that takes longer than the deadline
                answer.give(.success(7))
            }
        }
        XCTAssertEqual(value, 7)
    }

    func testACommitThatNeverAnswersIsAnOutcomeUnknownNotUnavailable() async {
        let executor = StorageExecutor(limits: .init(threads: 1, deadline: .milliseconds(100), commitWait: .milliseconds(200)))
        do {
            let _: Int = try await executor.awaitAnswer { (answer: FirstAnswer<Result<Int, VerificationError>>) in
                XCTAssertTrue(answer.holdForCommit())
            }
            XCTFail("answered")
        } catch {
            XCTAssertEqual(error.code, .storageOutcomeUnknown)
        }
    }

    func testACallerAnsweredAtItsDeadlineCannotBeHeldForACommit() async {
        let executor = StorageExecutor(limits: .init(threads: 1, deadline: .milliseconds(50)))
        let holder = UncheckedBox<FirstAnswer<Result<Int, VerificationError>>>()
        do {
            let _: Int = try await executor.awaitAnswer { (answer: FirstAnswer<Result<Int, VerificationError>>) in holder.value = answer }
            XCTFail("answered")
        } catch {
            XCTAssertEqual(error.code, .storageUnavailable)
        }
        XCTAssertEqual(holder.value?.holdForCommit(), false)
    }
}

private final class UncheckedBox<T>: @unchecked Sendable {
    var value: T?
}
