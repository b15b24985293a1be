import Foundation
import IAPCore
import Synchronization

/// The ledger as the gateway uses it: `SQLLedger`'s synchronous calls, each run on a
/// `StorageExecutor` thread and awaited with a deadline, so storage that stops answering (a frozen
/// PostgreSQL, a stalled disk) costs a caller at most the deadline and never a thread of Swift's
/// cooperative pool.
///
/// Also the one owner of what a storage failure tells a client: a plain "storage unavailable"
/// (engine codes such as `SQLite 13: database or disk is full` go to the log, with the request id),
/// and of readiness, which reflects whether writes succeed.
///
/// It declares only how a call runs (`hop`) and readiness (`ping`): every other call of the
/// protocols it serves is `StorageCalls+Ledgers.swift`'s, one line over `SQLLedger` each.
public final class AsyncSQLLedger: StorageCalls, Ledger, NotificationLedger, ComparisonLedger, ReconciliationLedger,
    FinishLedger, RolloutLedger, Sendable {
    /// The synchronous ledger the calls run on (tests and command-line tools read it directly).
    public let ledger: SQLLedger
    public let executor: StorageExecutor
    private let logger: Logger
    /// Set when a write fails for the storage's sake; cleared only by the readiness probe's own
    /// write succeeding (a background call that happened to write nothing proves nothing).
    private let writesFailing = Atomic<Bool>(false)
    /// Claims and inbox inserts, batched (`claim`, `enqueue`).
    let writer: BatchedWriter

    /// A readiness probe answers within this, however long the storage deadline is.
    public static let readinessDeadline: Duration = .seconds(1)

    /// `commitWait`: how much longer than `deadline` a write whose COMMIT was sent waits for it
    /// (`BlockingExecutor.Limits.commitWait`).
    public init(_ ledger: SQLLedger, deadline: Duration = .seconds(5), commitWait: Duration = .seconds(15),
                logger: Logger = .disabled) {
        self.ledger = ledger
        self.logger = logger
        executor = StorageExecutor(limits: .init(threads: ledger.concurrentCalls, deadline: deadline, commitWait: commitWait))
        writer = BatchedWriter(database: ledger.database, executor: executor)
    }

    /// Opens the ledger at `storage` (see `SQLLedger.init(storage:deadline:)`).
    public convenience init(storage: String, deadline: Duration = .seconds(5), commitWait: Duration = .seconds(15),
                            webhookAudience: WebhookAudience = .everyApp, logger: Logger = .disabled) throws(VerificationError) {
        self.init(try SQLLedger(storage: storage, deadline: deadline, webhookAudience: webhookAudience), deadline: deadline,
                  commitWait: commitWait, logger: logger)
    }

    // MARK: Calls

    public func hop<R: Sendable>(_ operation: String, _ call: StorageCall<R>) async throws(VerificationError) -> R {
        switch call {
        case .read(let body): return try await run(operation, isWrite: false, deadline: nil, body)
        case .write(let body): return try await run(operation, isWrite: true, deadline: nil, body)
        case .batched(let locks, let body):
            // Not a storage call of its own: queued with the writes beside it (`BatchedWriter`).
            let ledger = ledger
            do {
                return try await writer.write(locks: locks) { (connection) throws(VerificationError) in
                    try body(ledger, BatchSlot(connection: connection))
                }
            } catch {
                throw answered(error, operation: operation, isWrite: true)
            }
        }
    }

    private func run<R: Sendable>(_ operation: String, isWrite: Bool, deadline: Duration?,
                                  _ body: @escaping @Sendable (SQLLedger) throws(VerificationError) -> R)
        async throws(VerificationError) -> R {
        let ledger = ledger
        do {
            return try await executor.run(deadline: deadline) { () throws(VerificationError) -> R in try body(ledger) }
        } catch {
            throw answered(error, operation: operation, isWrite: isWrite)
        }
    }

    /// What a caller is told of a failed call: the storage's own failure logged and said generically.
    private func answered(_ error: VerificationError, operation: String, isWrite: Bool) -> VerificationError {
        // Any other refusal (a reused nonce, a purchase of another account) was the engine answering.
        guard error.code == .storageUnavailable || error.code == .storageOutcomeUnknown else { return error }
        if isWrite { writesFailing.store(true, ordering: .relaxed) }
        logger.warning("storage_failed", ["operation": String(operation.prefix { $0 != "(" }), "detail": error.message])
        return VerificationError(error.code, error.code == .storageOutcomeUnknown
            ? "the gateway's storage did not confirm the commit in time; its outcome is unknown"
            : "the gateway's storage is unavailable; try again later")
    }

    // MARK: Readiness

    /// Answers within `readinessDeadline`. After a write failed, the probe writes (and only that
    /// write succeeding makes the ledger ready again): with a full disk reads still succeed, and a
    /// probe that only read would say "ready" while every grant fails.
    public func ping() async throws(VerificationError) {
        let deadline = min(Self.readinessDeadline, executor.limits.deadline)
        if writesFailing.load(ordering: .relaxed) {
            try await run("ping", isWrite: true, deadline: deadline) { (l) throws(VerificationError) in try l.probeWrite() }
            writesFailing.store(false, ordering: .relaxed)
        } else {
            try await run("ping", isWrite: false, deadline: deadline) { (l) throws(VerificationError) in try l.ping() }
        }
    }
}
