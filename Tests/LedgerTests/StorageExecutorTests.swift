import Dispatch
import Foundation
import IAPCore
import Synchronization
import XCTest
@testable import Ledger

/// Storage calls run on threads of their own and are answered by their deadline, whatever the
/// engine does; on PostgreSQL no wait inside the engine outlasts the deadline either.
final class StorageExecutorTests: LedgerTestCase {
    /// A call stuck in the engine (here: on a semaphore) until the test lets it go.
    private final class Gate: Sendable {
        private let semaphore = DispatchSemaphore(value: 0)
        func wait() { semaphore.wait() }
        func open() { semaphore.signal() }
    }

    func testAStuckCallIsAnsweredAtItsDeadlineAndTheExecutorServesTheNextCallOnceTheEngineIsBack() async {
        let executor = StorageExecutor(limits: .init(threads: 1, deadline: .milliseconds(200)))
        let gate = Gate()
        let started = ContinuousClock.now
        let stuck = await storageError { () async throws(VerificationError) in
            try await executor.run { gate.wait() }
        }
        XCTAssertEqual(stuck?.code, .storageUnavailable)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5), "answered by the deadline, not by the engine")
        gate.open()
        let answer = await storageError { () async throws(VerificationError) in
            let value = try await executor.run { 42 }
            XCTAssertEqual(value, 42)
        }
        XCTAssertNil(answer)
    }

    /// The kernel knows each storage thread by its purpose and index (what `top -H`, perf and
    /// Benchmarks/tail-profile.sh show): not by the name of whatever thread created it.
    func testStorageThreadsCarryTheirNameInTheKernel() async throws {
        let executor = StorageExecutor(limits: .init(threads: 2, deadline: .seconds(5)))
        let name = try await executor.run { () throws(VerificationError) -> String in
            guard let comm = try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8) else {
                throw VerificationError(.internalError, "no /proc/thread-self/comm")
            }
            return comm.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        XCTAssertTrue(["storage.0", "storage.1"].contains(name), "the storage thread is named \(name)")
    }

    /// Deadlines are watched by one thread in deadline order: a short one that arrives behind a
    /// long one still wakes it and is answered at its own time.
    func testAShortDeadlineBehindALongerOneIsAnsweredAtItsOwn() async throws {
        let executor = StorageExecutor(limits: .init(threads: 2, deadline: .seconds(60)))
        let gate = Gate()
        async let long: VerificationError? = storageError { () async throws(VerificationError) in
            try await executor.run { gate.wait() }
        }
        try await Task.sleep(for: .milliseconds(50))
        let started = ContinuousClock.now
        let short = await storageError { () async throws(VerificationError) in
            try await executor.run(deadline: .milliseconds(200)) { gate.wait() }
        }
        XCTAssertEqual(short?.code, .storageUnavailable)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(10), "answered at its own deadline, not the earlier call's")
        gate.open()  // both stuck calls
        gate.open()
        let longError = await long
        XCTAssertNil(longError, "the long call finished once the engine was back")
    }

    func testACallWhoseDeadlinePassedWhileQueuedIsNeverRun() async throws {
        let executor = StorageExecutor(limits: .init(threads: 1, deadline: .milliseconds(100)))
        let gate = Gate()
        let ran = Atomic<Bool>(false)
        async let first: VerificationError? = storageError { () async throws(VerificationError) in
            try await executor.run { gate.wait() }
        }
        try await Task.sleep(for: .milliseconds(20))
        let queued = await storageError { () async throws(VerificationError) in
            try await executor.run { ran.store(true, ordering: .relaxed) }
        }
        XCTAssertEqual(queued?.code, .storageUnavailable)
        let firstError = await first
        XCTAssertEqual(firstError?.code, .storageUnavailable)
        gate.open()
        // The next call runs after the dropped one would have: the thread is the queue's only one.
        let after = await storageError { () async throws(VerificationError) in try await executor.run(deadline: .seconds(5)) {} }
        XCTAssertNil(after)
        XCTAssertFalse(ran.load(ordering: .relaxed), "nobody waited for it, so it did not write anything")
    }

    func testAFullQueueRefusesAtOnceInsteadOfPilingUpWork() async throws {
        let executor = StorageExecutor(limits: .init(threads: 1, queueCapacity: 1, deadline: .seconds(30)))
        let gate = Gate()
        async let stuck: VerificationError? = storageError { () async throws(VerificationError) in
            try await executor.run { gate.wait() }
        }
        try await Task.sleep(for: .milliseconds(50))
        async let waiting: VerificationError? = storageError { () async throws(VerificationError) in try await executor.run {} }
        try await Task.sleep(for: .milliseconds(50))
        let started = ContinuousClock.now
        let refused = await storageError { () async throws(VerificationError) in try await executor.run {} }
        XCTAssertEqual(refused?.code, .storageUnavailable)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5), "refused at once, not at the 30 s deadline")
        gate.open()
        let (first, second) = await (stuck, waiting)
        XCTAssertNil(first)
        XCTAssertNil(second)
    }

    func testAStorageFailureReachesTheClientWithoutTheEnginesText() async throws {
        try skipOnPostgres("the engine's text here is SQLite's")
        let ledger = AsyncSQLLedger(try openLedger())
        let database = try XCTUnwrap(ledger.ledger.database as? SQLiteDatabase)
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.executeScript("PRAGMA query_only = ON", operation: "configure")
        }
        let refused = await storageError { () async throws(VerificationError) in
            _ = try await ledger.issueNonce(bundleId: "com.example.app", account: "a", ttlSeconds: 60, now: 1, keyed: nil)
        }
        XCTAssertEqual(refused?.code, .storageUnavailable)
        XCTAssertFalse(refused?.message.contains("SQLite") ?? true, "\(refused?.message ?? "")")
    }

    /// Each path of the hop (batched, write, read) names the call that failed in the log, never in the
    /// answer; a failed write, batched or not, makes readiness probe with a write of its own.
    func testAFailedCallIsLoggedUnderItsOwnNameAndAFailedWriteKeepsTheLedgerUnreadyUntilAWriteSucceeds() async throws {
        try skipOnPostgres("a read-only connection is SQLite's PRAGMA")
        let lines = Mutex<[String]>([])
        let ledger = AsyncSQLLedger(try openLedger(), logger: Logger { line in lines.withLock { $0.append(line) } })
        let database = try XCTUnwrap(ledger.ledger.database as? SQLiteDatabase)
        func readOnly(_ on: Bool) throws {
            try database.withConnection { (connection) throws(VerificationError) in
                try connection.executeScript("PRAGMA query_only = \(on ? "ON" : "OFF")", operation: "configure")
            }
        }
        func loggedOperations() -> [String] {
            lines.withLock { $0 }.compactMap { line in
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String],
                      object["event"] == "storage_failed" else { return nil }
                return object["operation"]
            }
        }
        try readOnly(true)
        let batched = await storageError { () async throws(VerificationError) in
            _ = try await ledger.issueNonce(bundleId: "com.example.app", account: "a", ttlSeconds: 60, now: 1, keyed: nil)
        }
        let written = await storageError { () async throws(VerificationError) in
            _ = try await ledger.purgeAudit(olderThan: 1)
        }
        XCTAssertEqual(batched?.message, "the gateway's storage is unavailable; try again later")
        XCTAssertEqual(written?.message, "the gateway's storage is unavailable; try again later")
        XCTAssertEqual(loggedOperations(), ["issueNonce", "purgeAudit"])
        let entitlements = try await ledger.entitlements(bundleId: "com.example.app", account: "a")
        XCTAssertEqual(entitlements, [], "reads still answer")
        let unready = await storageError { () async throws(VerificationError) in try await ledger.ping() }
        XCTAssertEqual(unready?.code, .storageUnavailable, "the probe writes after a failed write")
        XCTAssertEqual(loggedOperations(), ["issueNonce", "purgeAudit", "ping"])
        try readOnly(false)
        try await ledger.ping()
        try await ledger.ping()
    }

    /// An instance paused mid-transaction (SIGSTOP, a long GC pause of its VM) holds a chain's lock:
    /// other instances' claims on that chain fail after `lock_timeout` instead of waiting with it, and
    /// the server ends the paused session once it sat idle in its transaction for twice the deadline,
    /// which frees the chain.
    func testAChainLockHeldByAPausedSessionFailsOthersAtTheLockTimeoutUntilTheServerEndsThatSession() throws {
        try XCTSkipUnless(usesPostgres, "needs IAPGW_TEST_POSTGRES_URL (Scripts/postgres.sh start)")
        let holder = try SQLLedger(storage: storage, deadline: .seconds(1))
        let claimant = try SQLLedger(storage: storage, deadline: .seconds(1))
        let locked = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let holderOutcome = Mutex<VerificationError?>(nil)
        Thread.detachNewThread {
            do throws(VerificationError) {
                try holder.database.transaction { (connection) throws(VerificationError) in
                    try connection.serializeTransaction(on: "chain:com.example.app:chain-1")
                    locked.signal()
                    // Paused: the client sends nothing, the server sees a session idle in its transaction.
                    Thread.sleep(forTimeInterval: 6)
                }
            } catch {
                holderOutcome.withLock { $0 = error }
            }
            finished.signal()
        }
        locked.wait()
        let pending = claim("bob", [transaction("t-1", original: "chain-1")], entitlements: [entitlement("bob", original: "chain-1")])
        let started = ContinuousClock.now
        XCTAssertEqual(errorCode { () throws(VerificationError) in _ = try claimant.claim(pending) }, .storageUnavailable)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(4), "refused at the 1 s lock timeout")

        var granted: ClaimOutcome?
        while granted == nil, ContinuousClock.now - started < .seconds(5) {
            granted = try? claimant.claim(pending)
        }
        XCTAssertEqual(granted?.newlyGranted, ["t-1"], "the server ended the paused session before it woke (6 s)")
        finished.wait()
        XCTAssertEqual(holderOutcome.withLock { $0 }?.code, .storageUnavailable, "the paused transaction was ended, not committed")
    }
}

/// The error `body` threw, nil if none.
private func storageError(_ body: () async throws(VerificationError) -> Void) async -> VerificationError? {
    do {
        try await body()
        return nil
    } catch {
        return error
    }
}
