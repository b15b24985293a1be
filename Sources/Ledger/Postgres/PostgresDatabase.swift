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
final class PostgresDatabase: SQLDatabase, @unchecked Sendable {
    var dialect: SQLDialect { .postgres }

    private let url: String
    private let idle = Mutex<[PostgresConnection]>([])
    let maxConnections: Int
    /// One permit per connection the pool may have open (idle or in use).
    private let permits: DispatchSemaphore
    /// The longest any wait lasts: for a pooled connection, a statement, a lock.
    private let waitMilliseconds: Int

    /// Transient conflicts between instances (a deadlock, a serialization failure) are retried
    /// this many times in all before the error reaches the caller.
    static let transactionAttempts = 3

    /// Connects once (so a wrong URL fails at start, not at the first request) and applies
    /// `migrations` not yet applied.
    init(url: String, migrations: [String], maxConnections: Int = 8,
         waitMilliseconds: Int = 5_000) throws(VerificationError) {
        self.url = url
        self.maxConnections = max(1, maxConnections)
        self.permits = DispatchSemaphore(value: max(1, maxConnections))
        self.waitMilliseconds = waitMilliseconds
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
        let connection = try PostgresConnection.open(url: url, connectTimeoutSeconds: max(1, (waitMilliseconds + 999) / 1000))
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
        return try body(connection)
    }

    /// BEGIN … COMMIT at READ COMMITTED (each statement sees what others committed before it;
    /// row locks, ON CONFLICT and advisory locks do the serialising). A deadlock or serialization
    /// failure rolls the attempt back and runs `body` again, as does a connection lost before BEGIN
    /// reached the server.
    @discardableResult
    func transaction<R: Sendable>(_ body: (any SQLConnection) throws(VerificationError) -> R)
        throws(VerificationError) -> R {
        var attempt = 1
        while true {
            let connection = try checkOut()
            var began = false
            do throws(VerificationError) {
                defer { checkIn(connection) }
                connection.resetFailure()
                // Explicit, whatever the server's default: the chain locks only serialise work if each
                // statement after the lock takes a fresh snapshot (a REPEATABLE READ snapshot is taken
                // before the lock is granted and would not see what its holder committed).
                try connection.executeScript("BEGIN ISOLATION LEVEL READ COMMITTED", operation: "begin")
                began = true
                do throws(VerificationError) {
                    let result = try body(connection)
                    try connection.executeScript("COMMIT", operation: "commit")
                    return result
                } catch {
                    // A failed ROLLBACK (connection gone) leaves nothing better to report than the original error.
                    if !connection.isBroken { try? connection.executeScript("ROLLBACK", operation: "rollback") }
                    throw error
                }
            } catch {
                let transient = ["40001", "40P01"].contains(connection.lastFailureState ?? "")
                let lostBeforeBegin = !began && connection.isBroken
                guard attempt < Self.transactionAttempts, transient || lostBeforeBegin else { throw error }
                attempt += 1
            }
        }
    }
}
