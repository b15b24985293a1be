import Dispatch
import Foundation
import IAPCore
import Synchronization

/// PostgreSQL behind libpq, for several gateway instances sharing one database.
///
/// A small pool of connections, opened on first need: a request waits for a free one rather than
/// opening more (the server's connection slots are shared by every instance). A connection found
/// broken (server restarted, backend terminated) is dropped, and the next checkout opens a fresh
/// one, so the gateway recovers by itself once the server is back.
///
/// The URL may hold a password: it is kept only to open connections, and never appears in an error.
final class PostgresDatabase: GroupCommittingDatabase, @unchecked Sendable {
    var dialect: SQLDialect { .postgres }

    private let url: String
    private let idle = Mutex<[PostgresConnection]>([])
    let maxConnections: Int
    /// One permit per connection the pool may have open (idle or in use).
    private let permits: DispatchSemaphore
    /// The longest any wait lasts: for a pooled connection, a statement, a lock.
    private let waitMilliseconds: Int
    /// Round trips to the server so far, over every connection of the pool.
    let roundTrips = RoundTripCounter()

    /// Transient conflicts between instances (a deadlock, a serialization failure) are retried
    /// this many times in all before the error reaches the caller.
    static let transactionAttempts = 3

    /// Half the pool commits batches, side by side; the rest serves reads.
    let writes: GroupCommit

    /// Connects once (so a wrong URL fails at start, not at the first request) and applies
    /// `migrations` not yet applied.
    init(url: String, migrations: [String], maxConnections: Int = 8,
         waitMilliseconds: Int = 5_000) throws(VerificationError) {
        self.url = url
        self.maxConnections = max(1, maxConnections)
        self.permits = DispatchSemaphore(value: max(1, maxConnections))
        self.waitMilliseconds = waitMilliseconds
        // Explicit, whatever the server's default: READ COMMITTED, so that the chain locks serialise
        // work (each statement after the lock takes a fresh snapshot; a REPEATABLE READ snapshot is
        // taken before the lock is granted and would not see what its holder committed).
        // A quarter of the connections lead batches at once, the rest serve reads. Fewer batches in
        // flight make each one larger, and a call's share of BEGIN, the locks and the COMMIT smaller:
        // with eight connections two leaders answered the most re-claims when the database shares
        // the gateway's cores (Benchmarks/scale-out.sh; one leader and four were both slower).
        writes = GroupCommit(begin: "BEGIN ISOLATION LEVEL READ COMMITTED", attempts: Self.transactionAttempts,
                             batchesInFlight: max(1, maxConnections / 4))
        let first = try open()
        idle.withLock { $0.append(first) }
        try SchemaMigrator.migrate(self, migrations: migrations)
    }

    // MARK: Pool

    private func checkOut() throws(VerificationError) -> PostgresConnection {
        guard permits.wait(timeout: .now() + .milliseconds(waitMilliseconds)) == .success else {
            throw VerificationError(.storageUnavailable, "storage: no PostgreSQL connection became free in time")
        }
        // The most recently used connection first: the others may idle out and be dropped.
        while let candidate = idle.withLock({ $0.popLast() }) {
            if candidate.isUsable { return candidate }
        }
        do {
            return try open()
        } catch {
            permits.signal()
            throw error
        }
    }

    /// A new session whose waits end: a frozen or overloaded server, or another instance holding a
    /// chain's lock, fails the statement after `waitMilliseconds` instead of holding the caller; a
    /// session of a paused instance idle in its transaction is ended by the server, freeing its locks.
    /// (The connect itself gives up after `connect_timeout`.)
    private func open() throws(VerificationError) -> PostgresConnection {
        let connection = try PostgresConnection.open(url: url, connectTimeoutSeconds: max(1, (waitMilliseconds + 999) / 1000),
                                                     roundTrips: roundTrips)
        try connection.executeScript("""
            SET statement_timeout = \(waitMilliseconds); SET lock_timeout = \(waitMilliseconds);
            SET idle_in_transaction_session_timeout = \(2 * waitMilliseconds)
            """, operation: "configure")
        return connection
    }

    private func checkIn(_ connection: PostgresConnection) {
        if !connection.isBroken { idle.withLock { $0.append(connection) } }
        permits.signal()
    }

    // MARK: SQLDatabase

    @discardableResult
    func withConnection<R: Sendable>(_ body: (any SQLConnection) throws(VerificationError) -> R)
        throws(VerificationError) -> R {
        let connection = try checkOut()
        defer { checkIn(connection) }
        let result = try body(connection)
        try connection.flushDeferred()
        return result
    }

    /// Write transactions are shared with the write calls waiting beside them (`GroupCommit`: one
    /// COMMIT, one WAL flush, for the batch; each call in a savepoint of its own), each batch on a
    /// pooled connection of its own (lent here); a deadlock or serialization failure rolls the call
    /// back to its savepoint and runs it again in a later transaction, as does a connection lost
    /// before BEGIN reached the server.
    func lendWriteConnection(_ use: (any GroupCommitConnection) -> Void) throws(VerificationError) {
        let connection = try checkOut()
        defer { checkIn(connection) }
        use(connection)
    }
}
