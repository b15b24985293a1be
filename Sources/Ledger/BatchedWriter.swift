import IAPCore
import Synchronization

/// The write calls of concurrent requests (POST /verify's claims, notification deliveries), written
/// in batches by storage calls that answer each caller themselves. A call given a storage thread of
/// its own wakes it, sleeps in the group commit and is woken again to answer: ~8 thread switches per
/// notification, 9-11 per evenly paced re-claim (profiled: Benchmarks/HISTORY.md). Here a caller only
/// queues its call (and starts a writer if none runs); a writer takes everything queued and runs it
/// in one transaction (`SQLDatabase.transactions(each:)`: `GroupCommit`, each call in a savepoint of
/// its own, one commit, one fsync), answers each, and goes on while calls wait. Each caller still
/// waits with the storage deadline, and is answered only after its commit.
final class BatchedWriter: Sendable {
    private struct State {
        var queued: [any QueuedCall] = []
        /// Calls taken by a writer, not yet answered.
        var writing = 0
        var writers = 0
    }

    private let database: any SQLDatabase
    private let executor: StorageExecutor
    /// Writers at once: the engine's group commit runs as many batches side by side (SQLite one).
    private let maxWriters: Int
    /// Calls waiting at most: as many as the executor took when each was a call of its own.
    private let capacity: Int
    private let state = Mutex(State())

    /// The most calls in one transaction: a bound on how long one commit holds the writer.
    static let callsPerBatch = 256

    init(database: any SQLDatabase, executor: StorageExecutor) {
        self.database = database
        self.executor = executor
        maxWriters = max(1, (database as? any GroupCommittingDatabase)?.writes.batchesInFlight ?? 1)
        capacity = executor.limits.threads + executor.limits.queueCapacity
    }

    /// Calls queued or being written, not yet answered (tests wait for a batch to fill).
    var waitingCalls: Int { state.withLock { $0.queued.count + $0.writing } }

    /// Runs `body` in a write transaction shared with the calls queued beside it, in a savepoint of
    /// its own (a throw rolls back its work alone; a transient conflict may run it again); answers
    /// after the commit, or with the storage deadline (`deadline`, the executor's by default).
    /// `locks`: the transaction locks `body` takes (`SQLWriteCall.locks`).
    func write<R: Sendable>(deadline: Duration? = nil, locks: [String] = [],
                            _ body: @escaping @Sendable (any SQLConnection) throws(VerificationError) -> R)
        async throws(VerificationError) -> R {
        try await executor.awaitAnswer(deadline: deadline) { (answer: FirstAnswer<Result<R, VerificationError>>) in
            admit(QueuedWrite(body, answer, locks: locks))
        }
    }

    private func admit(_ call: any QueuedCall) {
        let admitted = state.withLock { state -> Bool? in
            guard state.queued.count + state.writing < capacity else { return nil }
            state.queued.append(call)
            guard state.writers < maxWriters else { return false }
            state.writers += 1
            return true
        }
        guard let startsWriter = admitted else { return call.answer(refusal()) }
        guard startsWriter, !executor.start({ self.write() }) else { return }
        // The executor refused (full or stopped): with no writer left, nothing would answer the queue.
        let unanswered = state.withLock { state -> [any QueuedCall] in
            state.writers -= 1
            guard state.writers == 0 else { return [] }
            defer { state.queued.removeAll() }
            return state.queued
        }
        // This call is among `unanswered` when no writer is left; otherwise the running writer takes
        // it (refusing it here would answer 503 for a call it then commits).
        if unanswered.isEmpty { return }
        let refused = refusal()
        unanswered.forEach { $0.answer(refused) }
    }

    /// Built only for a call refused (not on every admitted one: this is every claim's path).
    private func refusal() -> VerificationError {
        VerificationError(.storageUnavailable, "\(executor.purpose): too many calls waiting")
    }

    /// A writer's loop, on a storage thread: batches until none is queued.
    private func write() {
        while true {
            let batch = state.withLock { state -> [any QueuedCall] in
                guard !state.queued.isEmpty else {
                    state.writers -= 1
                    return []
                }
                let count = min(state.queued.count, Self.callsPerBatch)
                state.writing += count
                defer { state.queued.removeFirst(count) }
                return Array(state.queued.prefix(count))
            }
            if batch.isEmpty { return }
            let taken = WriterTrace.now()
            // A call answered already (its deadline passed) is not run: its caller was told to try again.
            let open = batch.filter(\.isOpen)
            let failures = database.transactions(each: open.map { (call) in
                SQLWriteCall(run: { (connection) in call.run(connection) }, holdForCommit: { call.holdForCommit() }, locks: call.locks)
            })
            state.withLock { $0.writing -= batch.count }
            for (call, failure) in zip(open, failures) { call.answer(failure) }
            if WriterTrace.enabled {
                WriterTrace.record("batch", batch.map(\.queuedAt).min() ?? taken, taken, WriterTrace.now(), Int64(batch.count))
            }
        }
    }
}

/// A call queued for a writer: run in its batch (again after a transient conflict), answered after.
private protocol QueuedCall: Sendable {
    /// False once its caller was answered (its deadline passed).
    var isOpen: Bool { get }
    /// See `SQLWriteCall.holdForCommit`.
    func holdForCommit() -> Bool
    /// When it was queued (`WriterTrace.now()`: 0 while the trace is off).
    var queuedAt: Int64 { get }
    /// See `SQLWriteCall.locks`.
    var locks: [String] { get }
    func run(_ connection: any SQLConnection) -> VerificationError?
    /// Its batch's verdict: nil once its work is committed (the caller gets its value), else the failure.
    func answer(_ failure: VerificationError?)
}

/// `value` is set by the thread leading the batch and read by the writer after its batch is
/// answered: `GroupCommit` orders the two (the leader finishes a call, then signals its waiter).
private final class QueuedWrite<R: Sendable>: QueuedCall, @unchecked Sendable {
    private let body: @Sendable (any SQLConnection) throws(VerificationError) -> R
    private let caller: FirstAnswer<Result<R, VerificationError>>
    private var value: R?
    let queuedAt = WriterTrace.now()
    let locks: [String]

    init(_ body: @escaping @Sendable (any SQLConnection) throws(VerificationError) -> R,
         _ caller: FirstAnswer<Result<R, VerificationError>>, locks: [String]) {
        self.body = body
        self.caller = caller
        self.locks = locks
    }

    var isOpen: Bool { caller.isOpen }

    func holdForCommit() -> Bool { caller.holdForCommit() }

    func run(_ connection: any SQLConnection) -> VerificationError? {
        do throws(VerificationError) {
            value = try body(connection)
            return nil
        } catch {
            return error
        }
    }

    func answer(_ failure: VerificationError?) {
        if let failure { return caller.give(.failure(failure)) }
        guard let value else {
            return caller.give(.failure(VerificationError(.internalError, "storage: a write call was never run")))
        }
        caller.give(.success(value))
    }
}
