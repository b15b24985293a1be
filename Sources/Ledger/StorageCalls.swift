import IAPCore

/// One storage call as the ledger's protocols ask for it: `SQLLedger`'s synchronous work, and the
/// path it takes. The path is part of the call because each has its own behaviour: a read fails
/// without marking the storage unwritable; a write that fails for the storage's sake does; a batched
/// write is queued with the writes beside it and committed in their transaction (`BatchedWriter`).
public enum StorageCall<R: Sendable>: Sendable {
    case read(@Sendable (SQLLedger) throws(VerificationError) -> R)
    case write(@Sendable (SQLLedger) throws(VerificationError) -> R)
    /// `locks`: the transaction locks the work takes (`SQLWriteCall.locks`).
    case batched(locks: [String], @Sendable (SQLLedger, BatchSlot) throws(VerificationError) -> R)
}

/// A batched write's place in its batch: the transaction's connection, in a savepoint of the write's
/// own (opaque outside the ledger, which alone speaks SQL).
public struct BatchSlot {
    let connection: any SQLConnection
}

/// What runs storage calls off Swift's cooperative pool, with the storage deadline. Conforming to it
/// gives every call of `Ledger`, `NotificationLedger`, `ComparisonLedger`, `ReconciliationLedger`,
/// `FinishLedger` and `RolloutLedger` but `ping` (`StorageCalls+Ledgers.swift` says which path each
/// takes), so the engine's decisions stay in `SQLLedger` and the waiting in one place.
public protocol StorageCalls: Sendable {
    /// Runs `call`; `operation` names it in what a failure logs.
    func hop<R: Sendable>(_ operation: String, _ call: StorageCall<R>) async throws(VerificationError) -> R
}

extension StorageCalls {
    func read<R: Sendable>(_ operation: String = #function,
                           _ body: @escaping @Sendable (SQLLedger) throws(VerificationError) -> R)
        async throws(VerificationError) -> R {
        try await hop(operation, .read(body))
    }

    func write<R: Sendable>(_ operation: String = #function,
                            _ body: @escaping @Sendable (SQLLedger) throws(VerificationError) -> R)
        async throws(VerificationError) -> R {
        try await hop(operation, .write(body))
    }

    func batched<R: Sendable>(_ operation: String = #function, locks: [String] = [],
                              _ body: @escaping @Sendable (SQLLedger, BatchSlot) throws(VerificationError) -> R)
        async throws(VerificationError) -> R {
        try await hop(operation, .batched(locks: locks, body))
    }
}
