import Dispatch
import IAPCore
import Synchronization

/// A connection a batch of grouped write calls runs on.
protocol GroupCommitConnection: SQLConnection {
    /// True while a transaction is open (false once the engine rolled it back under a call).
    var inTransaction: Bool { get }
    /// The session is gone (server restarted, backend terminated): nothing more can run on it.
    var isBroken: Bool { get }
    /// The last failure since `resetFailure()` was a transient conflict with another session (a
    /// deadlock, a serialization failure): the call may succeed if run again.
    var lastFailureIsTransient: Bool { get }
    /// The last failure since `resetFailure()` was the engine's own answer (an error it reported),
    /// not silence (a session lost with no answer): a COMMIT refused so did not commit.
    var lastFailureWasAnswered: Bool { get }
    func resetFailure()
}

/// An engine whose write transactions are group-committed (tests count its COMMITs).
protocol GroupCommittingDatabase: SQLDatabase {
    var writes: GroupCommit { get }
    /// Lends a leader the connection its batch runs on (`GroupCommit.Lend`).
    func lendWriteConnection(_ use: (any GroupCommitConnection) -> Void) throws(VerificationError)
}

extension GroupCommittingDatabase {
    @discardableResult
    func transaction<R: Sendable>(_ body: (any SQLConnection) throws(VerificationError) -> R)
        throws(VerificationError) -> R {
        try writes.run(body, lend: lendWriteConnection)
    }

    func transactions(each calls: [SQLWriteCall]) -> [VerificationError?] {
        writes.run(each: calls, lend: lendWriteConnection)
    }
}

/// Group commit, the same for both engines: the write calls that arrive while one batch commits
/// wait (asleep) and are run together by one of them, the leader, in the next transaction: each in a
/// savepoint of its own (a call that throws is rolled back to it and fails alone), then one COMMIT
/// (one durable flush) for all, and each caller is answered only after that COMMIT returned, so a
/// 200 still means "on disk". A leader commits only its own batch, then passes the leading to the
/// oldest call that arrived meanwhile. Up to `batchesInFlight` batches run at once, each on its own
/// connection (SQLite has one; PostgreSQL's backends run batches side by side, and its WAL writer
/// flushes their commits together).
final class GroupCommit: Sendable {
    /// Opens each batch's transaction.
    private let begin: String
    /// Runs of one call in all (the first included) when it meets a transient conflict, or a
    /// connection found lost before BEGIN reached the server.
    private let attempts: Int
    /// The most batches committing at once.
    let batchesInFlight: Int
    /// Calls waiting for a batch, in arrival order, and how many callers are leading one. Calls
    /// wait only while every leading slot is taken.
    private let batching = Mutex(Batching())
    private struct Batching {
        var waiting: [GroupedWrite] = []
        var leaders = 0
    }
    private let commitCount = Atomic<Int>(0)

    init(begin: String, attempts: Int, batchesInFlight: Int = 1) {
        self.begin = begin
        self.attempts = max(1, attempts)
        self.batchesInFlight = max(1, batchesInFlight)
    }

    /// COMMITs of batches so far: fewer than the `run` calls when batches formed.
    var commits: Int { commitCount.load(ordering: .relaxed) }

    /// Write calls queued for the next batch now (tests wait for a batch to fill).
    var waitingWrites: Int { batching.withLock { $0.waiting.count } }

    /// A connection lent to the leader for one pass over its batch; a throw (no connection) fails
    /// the calls not yet answered.
    typealias Lend = (_ use: (any GroupCommitConnection) -> Void) throws(VerificationError) -> Void

    /// Runs `body` in the next batch's transaction (see the type); `lend` gives the connection if
    /// this caller leads. A throw rolls back `body`'s own work, and a failed COMMIT every call of the batch.
    func run<R: Sendable>(_ body: (any SQLConnection) throws(VerificationError) -> R, lend: Lend)
        throws(VerificationError) -> R {
        var value: R?
        let failure = withoutActuallyEscaping(body) { (body) -> VerificationError? in
            run(each: [SQLWriteCall(run: { (connection) -> VerificationError? in
                do throws(VerificationError) {
                    value = try body(connection)
                    return nil
                } catch {
                    return error
                }
            })], lend: lend)[0]
        }
        if let failure { throw failure }
        guard let value else { throw VerificationError(.internalError, "storage: a write call was never run") }
        return value
    }

    /// Runs `calls` from one thread as `run` runs one, each a call of its own (its own savepoint,
    /// retries and answer) in the next batch: the calls a `BatchedWriter` queued. Returns each call's
    /// error, or nil once its work is committed, in order.
    func run(each calls: [SQLWriteCall], lend: Lend) -> [VerificationError?] {
        let writes = calls.map(GroupedWrite.init)
        guard !writes.isEmpty else { return [] }
        let leads = batching.withLock { state -> Bool in
            let leads = state.leaders < batchesInFlight
            if leads { state.leaders += 1 }
            // A leader's batch is its own call and the queue: the calls after its first go there.
            state.waiting.append(contentsOf: writes.dropFirst(leads ? 1 : 0))
            return leads
        }
        for (index, write) in writes.enumerated() {
            // A follower sleeps (no spinning on a mutex) until a leader answered it, or passed it
            // the leading: then this call's batch is the next one.
            if index > 0 || !leads { write.waitForTurn() }
            if !write.finished { lead(write, lend) }
        }
        return writes.map(\.failure)
    }

    /// Commits the leader's own call and the waiting ones, then passes the leading on.
    private func lead(_ own: GroupedWrite, _ lend: Lend) {
        var batch = batching.withLock { state in
            defer { state.waiting.removeAll(keepingCapacity: true) }
            return [own] + state.waiting
        }
        // Normally one pass; another for calls to be run again (on a fresh connection if it was lost).
        while !batch.isEmpty {
            let pending = batch
            batch = []
            do throws(VerificationError) {
                try lend { connection in batch = commit(pending[...], on: connection) }
            } catch {
                pending.forEach { $0.finish(error) }
            }
        }
        // The call handed the leading leaves the queue, so no other leader hands it on too.
        batching.withLock { state in
            if state.waiting.isEmpty { state.leaders -= 1 } else { state.waiting.removeFirst().takeTurn() }
        }
    }

    /// Runs `batch` in one transaction on `connection` and answers each call; returns the calls to
    /// run again (a transient conflict, or BEGIN on a lost connection, with attempts left).
    private func commit(_ batch: ArraySlice<GroupedWrite>, on connection: any GroupCommitConnection) -> [GroupedWrite] {
        var batch = batch
        var again: [GroupedWrite] = []
        // Normally one transaction; another only if the engine rolled it back under a call (an I/O
        // error, a full disk), which takes the calls already applied down with it.
        while !batch.isEmpty {
            let began = WriterTrace.now()
            // Every call's locks, in one order, before any call runs (`SQLWriteCall.locks`); BEGIN goes
            // in one pipeline with them. A BEGIN that never reached the server is found here or there,
            // on a lost connection either way, and the calls run again.
            let locks = Set(batch.flatMap(\.locks)).sorted()
            do throws(VerificationError) {
                if locks.isEmpty {
                    try connection.executeScript(begin, operation: "begin")
                } else {
                    try connection.deferScript(begin, operation: "begin")
                }
            } catch {
                for write in batch {
                    if connection.isBroken, write.mayTryAgain(within: attempts) { again.append(write) } else { write.finish(error) }
                }
                return again
            }
            do throws(VerificationError) {
                try connection.serializeTransaction(onEach: locks)
            } catch {
                let transient = connection.lastFailureIsTransient
                if !connection.isBroken { try? connection.executeScript("ROLLBACK", operation: "rollback") }
                for write in batch {
                    if transient || connection.isBroken, write.mayTryAgain(within: attempts) { again.append(write) } else { write.finish(error) }
                }
                return again
            }
            var applied: [GroupedWrite] = []
            var lost: VerificationError?
            var calls = 0
            while lost == nil, let write = batch.popFirst() {
                calls += 1
                switch apply(write, savepoint: "grouped_write_\(calls)", on: connection) {
                case .applied:
                    applied.append(write)
                case .failed(let error, let transient):
                    if transient, write.mayTryAgain(within: attempts) { again.append(write) } else { write.finish(error) }
                case .transactionLost(let error):
                    write.finish(error)
                    lost = error
                }
            }
            if let lost {
                if !connection.isBroken { try? connection.executeScript("ROLLBACK", operation: "rollback") }
                applied.forEach { $0.finish(lost) }
                continue
            }
            // A caller answered meanwhile (its deadline passed while the storage was slow or frozen)
            // was told its work did not happen: it must not commit now, nor later. The whole
            // transaction goes, and the calls still waiting run again in the next one.
            let held = applied.filter { $0.holdForCommit() }
            if held.count < applied.count {
                if !connection.isBroken { try? connection.executeScript("ROLLBACK", operation: "rollback") }
                for write in applied where !held.contains(where: { $0 === write }) { write.finish(Self.answeredBeforeCommit) }
                again.append(contentsOf: held)
                continue
            }
            let committing = WriterTrace.now()
            connection.resetFailure()
            do throws(VerificationError) {
                try connection.executeScript("COMMIT", operation: "commit")
                commitCount.add(1, ordering: .relaxed)
                // Guarded here as in BatchedWriter: a variadic call builds its array even when the trace is off.
                if WriterTrace.enabled { WriterTrace.record("commit", began, committing, WriterTrace.now(), Int64(calls)) }
                applied.forEach { $0.finish(nil) }
            } catch {
                // A session lost with its COMMIT sent and no answer may or may not have committed
                // it: the callers must not be told that nothing happened. (A server that ended the
                // session first, an idle transaction's timeout, said so: nothing committed.)
                if connection.isBroken, !connection.lastFailureWasAnswered {
                    let unknown = VerificationError(.storageOutcomeUnknown, "storage: the session was lost with its COMMIT sent")
                    applied.forEach { $0.finish(unknown) }
                } else {
                    // A failed ROLLBACK leaves nothing better to report than the COMMIT's error.
                    try? connection.executeScript("ROLLBACK", operation: "rollback")
                    applied.forEach { $0.finish(error) }
                }
            }
        }
        return again
    }

    /// The verdict of a call whose caller was answered before its commit (nobody reads it).
    private static let answeredBeforeCommit = VerificationError(.storageUnavailable, "storage: the caller was answered before the commit")

    private enum Applied {
        case applied
        /// The call threw; its savepoint was rolled back and the transaction goes on. Transient: a
        /// conflict with another session, worth running the call again in a later transaction.
        case failed(VerificationError, transient: Bool)
        /// The transaction is gone (the engine rolled it back, or the savepoint could not be undone).
        case transactionLost(VerificationError)
    }

    /// Runs one call of the batch inside a savepoint of its own. SAVEPOINT and RELEASE are deferred
    /// (on PostgreSQL they go in one pipeline with the call's first statement and with the next
    /// call's, or the COMMIT): one round trip per call. Each call's savepoint has a name of its own,
    /// so a RELEASE that failed unseen can never make the next call's rollback undo this call's work:
    /// that rollback then finds no savepoint of its name and the whole transaction is given up.
    private func apply(_ write: GroupedWrite, savepoint: String, on connection: any GroupCommitConnection) -> Applied {
        do throws(VerificationError) {
            try connection.deferScript("SAVEPOINT \(savepoint)", operation: "savepoint")
        } catch {
            return .transactionLost(error)
        }
        connection.resetFailure()
        guard let error = write.run(connection) else {
            do throws(VerificationError) {
                try connection.deferScript("RELEASE SAVEPOINT \(savepoint)", operation: "savepoint")
                return .applied
            } catch {
                return .transactionLost(error)
            }
        }
        let transient = connection.lastFailureIsTransient
        guard connection.inTransaction else { return .transactionLost(error) }
        do throws(VerificationError) {
            try connection.executeScript("ROLLBACK TO SAVEPOINT \(savepoint); RELEASE SAVEPOINT \(savepoint)",
                                         operation: "rollback to savepoint")
            return .failed(error, transient: transient)
        } catch {
            return .transactionLost(error)
        }
    }
}

/// One write call waiting for its batch. Touched by its caller's thread and by the leader committing
/// its batch; the semaphore orders the two (the leader writes, then signals; the caller wakes, then reads).
private final class GroupedWrite: @unchecked Sendable {
    private var body: ((any SQLConnection) -> VerificationError?)?
    private let hold: () -> Bool
    private(set) var finished = false
    private(set) var failure: VerificationError?
    /// Tries of this call that ended in a retryable failure so far.
    private var failedTries = 0
    private let turn = DispatchSemaphore(value: 0)

    /// See `SQLWriteCall.locks`.
    let locks: [String]

    init(_ call: SQLWriteCall) {
        body = call.run
        hold = call.holdForCommit
        locks = call.locks
    }

    /// See `SQLWriteCall.holdForCommit`.
    func holdForCommit() -> Bool { hold() }

    /// Runs the caller's body (again only after a transient conflict rolled it back); its error, if any.
    func run(_ connection: any SQLConnection) -> VerificationError? {
        guard let body, !finished else {
            return VerificationError(.internalError, "storage: a write call was run after its answer")
        }
        return body(connection)
    }

    /// Counts a try that may be retried; false once `limit` tries are used up.
    func mayTryAgain(within limit: Int) -> Bool {
        failedTries += 1
        return failedTries < limit
    }

    /// The batch's verdict for this call: nil once its work is committed.
    func finish(_ failure: VerificationError?) {
        // The body goes now: the caller's closure must not outlive its `transaction` call.
        body = nil
        self.failure = failure
        finished = true
        turn.signal()
    }

    /// Sleeps until the call is answered (`finished`) or its caller is to lead the next batch.
    func waitForTurn() { turn.wait() }

    /// Wakes the caller, unanswered, to lead the next batch.
    func takeTurn() { turn.signal() }
}
