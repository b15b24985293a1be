import IAPCore
import Synchronization

/// The inbox inserts of concurrent deliveries, written in batches by storage calls that answer each
/// delivery themselves. A delivery that took a storage thread of its own woke it, slept in the group
/// commit and was woken again to answer: issue 14's profile of the notification route had ~8
/// thread switches per notification. Here a delivery only queues its entry (and starts a writer if
/// none runs); a writer takes everything queued, inserts it in one transaction
/// (`SQLLedger.enqueue(batch:)`: one commit, one fsync), answers each, and goes on while entries
/// wait. Each delivery still waits with the storage deadline, and is answered only after its commit.
final class InboxWriter: Sendable {
    private struct Queued {
        let entry: InboxEntry
        let answer: FirstAnswer<Result<Bool, VerificationError>>
    }

    private struct State {
        var queued: [Queued] = []
        /// Entries taken by a writer, not yet answered.
        var writing = 0
        var writers = 0
    }

    private let ledger: SQLLedger
    private let executor: StorageExecutor
    /// Writers at once: the engine's group commit runs as many batches side by side (SQLite one).
    private let maxWriters: Int
    /// Deliveries waiting at most: as many as the executor took when each was a call of its own.
    private let capacity: Int
    private let state = Mutex(State())

    /// The most entries in one transaction: a bound on how long one commit holds the writer.
    static let entriesPerBatch = 256

    init(ledger: SQLLedger, executor: StorageExecutor) {
        self.ledger = ledger
        self.executor = executor
        maxWriters = max(1, (ledger.database as? any GroupCommittingDatabase)?.writes.batchesInFlight ?? 1)
        capacity = executor.limits.threads + executor.limits.queueCapacity
    }

    /// Deliveries queued or being written, not yet answered (tests wait for a batch to fill).
    var waitingEntries: Int { state.withLock { $0.queued.count + $0.writing } }

    func enqueue(_ entry: InboxEntry) async throws(VerificationError) -> Bool {
        try await executor.awaitAnswer { (answer: FirstAnswer<Result<Bool, VerificationError>>) in
            let refusal = VerificationError(.storageUnavailable, "\(executor.purpose): too many calls waiting")
            let admitted = state.withLock { state -> Bool? in
                guard state.queued.count + state.writing < capacity else { return nil }
                state.queued.append(Queued(entry: entry, answer: answer))
                guard state.writers < maxWriters else { return false }
                state.writers += 1
                return true
            }
            guard let startsWriter = admitted else { return answer.give(.failure(refusal)) }
            guard startsWriter, !executor.start({ self.write() }) else { return }
            // The executor refused (full or stopped): with no writer left, nothing would answer the queue.
            let unanswered = state.withLock { state -> [Queued] in
                state.writers -= 1
                guard state.writers == 0 else { return [] }
                defer { state.queued.removeAll() }
                return state.queued
            }
            // This delivery's entry is among `unanswered` when no writer is left; otherwise the
            // running writer takes it (refusing it here would answer 503 for an entry it then stores).
            unanswered.forEach { $0.answer.give(.failure(refusal)) }
        }
    }

    /// A writer's loop, on a storage thread: batches until none is queued.
    private func write() {
        while true {
            let batch = state.withLock { state -> [Queued] in
                guard !state.queued.isEmpty else {
                    state.writers -= 1
                    return []
                }
                let count = min(state.queued.count, Self.entriesPerBatch)
                state.writing += count
                defer { state.queued.removeFirst(count) }
                return Array(state.queued.prefix(count))
            }
            if batch.isEmpty { return }
            // A delivery answered already (its deadline passed) is not written: it was told to try again.
            let open = batch.filter(\.answer.isOpen)
            let results = ledger.enqueue(batch: open.map(\.entry))
            state.withLock { $0.writing -= batch.count }
            for (queued, result) in zip(open, results) { queued.answer.give(result) }
        }
    }
}
