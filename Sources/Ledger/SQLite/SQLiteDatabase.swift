import CSQLite
import Foundation
import IAPCore
import Synchronization

/// One SQLite connection, used by one thread at a time (under `SQLiteDatabase`'s mutex).
///
/// Error messages name the operation and SQLite's generic text for the result code
/// (`sqlite3_errstr`), never `sqlite3_errmsg`, which may quote schema details, and never values.
final class SQLiteConnection: GroupCommitConnection {
    var dialect: SQLDialect { .sqlite }
    let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]

    init(handle: OpaquePointer) { self.handle = handle }

    /// False once SQLite is back in autocommit mode: no transaction open (or it rolled one back itself).
    var inTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// A file, not a session: never lost. Conflicts wait (busy timeout) rather than fail transiently.
    var isBroken: Bool { false }
    var lastFailureIsTransient: Bool { false }
    /// SQLite runs in the process: every failure is its answer.
    var lastFailureWasAnswered: Bool { true }
    func resetFailure() {}

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    static func storageError(_ operation: String, _ code: Int32) -> VerificationError {
        let text = sqlite3_errstr(code).map { String(cString: $0) } ?? "unknown error"
        return VerificationError(.storageUnavailable, "storage: \(operation) failed (SQLite \(code): \(text))")
    }

    /// Runs SQL without parameters (pragmas, migration scripts); may hold several statements.
    func executeScript(_ sql: String, operation: String) throws(VerificationError) {
        let code = sqlite3_exec(handle, sql, nil, nil, nil)
        guard code == SQLITE_OK else { throw Self.storageError(operation, code) }
    }

    /// A write; a constraint violation is returned for the caller to handle, any other failure throws.
    func write(_ sql: String, _ arguments: [SQLValue]) throws(VerificationError) -> WriteResult {
        let statement = try prepared(sql, arguments)
        defer { release(statement) }
        let code = sqlite3_step(statement)
        switch code {
        case SQLITE_DONE, SQLITE_ROW:
            return .changed(Int(sqlite3_changes(handle)))
        case _ where code & 0xFF == SQLITE_CONSTRAINT:
            return .constraintViolation(String(code))
        default:
            throw Self.storageError("write", code)
        }
    }

    /// Reads every row the query returns through `decode`.
    func queryRows<T>(_ sql: String, _ arguments: [SQLValue], decode: (SQLRow) throws(VerificationError) -> T)
        throws(VerificationError) -> [T] {
        let statement = try prepared(sql, arguments)
        defer { release(statement) }
        var rows: [T] = []
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { return rows }
            guard code == SQLITE_ROW else { throw Self.storageError("read", code) }
            rows.append(try decode(SQLRow(source: SQLiteRow(statement: statement))))
        }
    }

    /// A statement from the cache (prepared once per connection), reset and bound to `arguments`.
    /// The cache is keyed by SQL text; callers pass only constant SQL, so it stays small.
    private func prepared(_ sql: String, _ arguments: [SQLValue]) throws(VerificationError) -> OpaquePointer {
        let statement: OpaquePointer
        if let cached = statements[sql] {
            statement = cached
        } else {
            var fresh: OpaquePointer?
            let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &fresh, nil)
            guard code == SQLITE_OK, let fresh else { throw Self.storageError("prepare", code) }
            statements[sql] = fresh
            statement = fresh
        }
        for (offset, argument) in arguments.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch argument {
            case .null:
                code = sqlite3_bind_null(statement, index)
            case .integer(let value):
                code = sqlite3_bind_int64(statement, index, value)
            case .text(let value):
                code = sqlite3_bind_text(statement, index, value, -1, iapgw_sqlite_transient())
            case .blob(let value):
                code = value.withUnsafeBytes { bytes in
                    // A zero-length blob still needs a non-null pointer, or SQLite stores NULL.
                    sqlite3_bind_blob(statement, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1),
                                      Int32(bytes.count), iapgw_sqlite_transient())
                }
            }
            guard code == SQLITE_OK else {
                release(statement)
                throw Self.storageError("bind", code)
            }
        }
        return statement
    }

    /// SQLite has one writer at a time: a transaction (BEGIN IMMEDIATE) already excludes every other.
    func serializeTransaction(on key: String) throws(VerificationError) {}
    func serializeTransaction(onEach keys: [String]) throws(VerificationError) {}

    func trySerializeTransaction(on keys: [String]) throws(VerificationError) -> Set<String> { Set(keys) }

    private func release(_ statement: OpaquePointer) {
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
    }
}

/// SQLite's current row of a statement.
struct SQLiteRow: SQLRowSource {
    let statement: OpaquePointer

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }

    func integer(_ column: Int32) -> Int64? {
        isNull(column) ? nil : sqlite3_column_int64(statement, column)
    }

    func text(_ column: Int32) -> String? {
        guard !isNull(column), let bytes = sqlite3_column_text(statement, column) else { return nil }
        let count = Int(sqlite3_column_bytes(statement, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    func blob(_ column: Int32) -> Data? {
        guard !isNull(column) else { return nil }
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return Data() }
        return Data(bytes: bytes, count: count)
    }
}

/// One SQLite database file behind one connection guarded by a mutex: simple, and correct for a
/// gateway whose writes are short. Other processes may open the same file; `busy_timeout` makes
/// their writers wait for each other instead of failing.
///
/// Write transactions are group-committed (`GroupCommit`): the calls waiting for the connection
/// while one commits are run together, each in a savepoint of its own, in one transaction with one
/// COMMIT (one WAL fsync) for all of them.
final class SQLiteDatabase: GroupCommittingDatabase, @unchecked Sendable {
    var dialect: SQLDialect { .sqlite }
    private let connection: SQLiteConnection
    private let lock = Mutex(())
    private var checkpointer: WALCheckpointer?
    /// BEGIN IMMEDIATE takes the write lock up front, so two connections never deadlock upgrading
    /// read locks. SQLite reports no transient conflicts (its busy timeout waits instead).
    let writes = GroupCommit(begin: "BEGIN IMMEDIATE", attempts: 1)

    /// Opens (creating if needed) the file at `path` and applies `migrations` not yet applied.
    init(path: String, migrations: [String], busyTimeoutMilliseconds: Int32 = 10_000) throws(VerificationError) {
        // SQLite would create the file with the umask's mode (often 0644, readable by every local
        // user) and gives its WAL and SHM the database's mode: so a new database starts as an empty
        // 0600 file here (a valid empty database), holding accounts and bindings for the owner alone.
        // An existing file keeps the mode its operator gave it.
        let created = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if created >= 0 { close(created) }
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let code = sqlite3_open_v2(path, &handle, flags, nil)
        guard code == SQLITE_OK, let handle else {
            if let handle { sqlite3_close_v2(handle) }
            throw SQLiteConnection.storageError("open", code)
        }
        connection = SQLiteConnection(handle: handle)
        sqlite3_extended_result_codes(handle, 1)
        // The busy timeout comes first: switching to WAL needs a lock another process may hold.
        sqlite3_busy_timeout(handle, busyTimeoutMilliseconds)
        // synchronous=FULL: each COMMIT syncs the WAL before it returns, so what an answer reports
        // (a grant, a binding, a spent nonce, an accepted notification) survives a power cut or an
        // OS crash, not only a crash of this process (all that NORMAL promises).
        try connection.executeScript("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; "
                                     + "PRAGMA wal_autocheckpoint=\(WALCheckpointer.backstopPages);",
                                     operation: "configure")
        try SchemaMigrator.migrate(self, migrations: migrations)
        checkpointer = WALCheckpointer(path: path)
    }

    /// Runs `body` with exclusive use of the connection (no transaction of its own).
    @discardableResult
    func withConnection<R: Sendable>(_ body: (any SQLConnection) throws(VerificationError) -> R)
        throws(VerificationError) -> R {
        let connection = self.connection
        return try lock.withLock { (_: inout ()) throws(VerificationError) -> R in try body(connection) }
    }

    /// Write transactions are shared with the calls waiting beside them (see the type), on the one connection.
    func lendWriteConnection(_ use: (any GroupCommitConnection) -> Void) throws(VerificationError) {
        let connection = self.connection
        lock.withLock { _ in use(connection) }
    }
}
