import Foundation
import IAPCore

/// The seam between the ledger's logic (`SQLLedger`, written once) and a storage engine (SQLite for
/// one instance, PostgreSQL for many). The ledger speaks SQL with `?` placeholders that both engines
/// run as written; where they differ it asks its connection's `dialect`, never the engine's type.

/// A value bound to or read from a statement parameter.
enum SQLValue: Sendable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByNilLiteral {
    case null
    case integer(Int64)
    case text(String)
    case blob(Data)

    init(stringLiteral value: String) { self = .text(value) }
    init(integerLiteral value: Int64) { self = .integer(value) }
    init(nilLiteral: ()) { self = .null }

    static func text(_ value: String?) -> SQLValue { value.map { .text($0) } ?? .null }
    static func integer(_ value: Int64?) -> SQLValue { value.map { .integer($0) } ?? .null }
}

/// The result of a write that may break a constraint the caller knows how to handle.
enum WriteResult: Equatable {
    case changed(Int)
    /// The engine's own code for the violated constraint (SQLite's extended result code, or
    /// PostgreSQL's SQLSTATE), for tests and logs; callers only branch on the case.
    case constraintViolation(String)
}

/// Where the engines' SQL differs. Everything else the ledger writes is common SQL.
enum SQLDialect: Sendable {
    case sqlite, postgres

    /// Appended to a SELECT inside a transaction that takes rows for processing: several instances
    /// on PostgreSQL skip rows another one holds instead of waiting for it (SQLite's single writer
    /// already keeps a second worker out).
    var lockRowsSkippingLocked: String {
        switch self {
        case .sqlite: return ""
        case .postgres: return " FOR UPDATE SKIP LOCKED"
        }
    }

    /// A predicate: the JSON array of strings in column `column` contains the parameter `?`.
    func jsonArrayContains(_ column: String) -> String {
        switch self {
        case .sqlite: return "EXISTS (SELECT 1 FROM json_each(\(column)) p WHERE p.value = ?)"
        case .postgres: return "EXISTS (SELECT 1 FROM json_array_elements_text(\(column)::json) p WHERE p = ?)"
        }
    }
}

/// One connection, used by one thread at a time (the database hands it out).
protocol SQLConnection: AnyObject {
    var dialect: SQLDialect { get }

    /// Runs SQL without parameters (migration scripts, transaction control); may hold several statements.
    func executeScript(_ sql: String, operation: String) throws(VerificationError)

    /// A write; a constraint violation is returned for the caller to handle, any other failure throws.
    func write(_ sql: String, _ arguments: [SQLValue]) throws(VerificationError) -> WriteResult

    /// Reads every row the query returns through `decode`.
    func queryRows<T>(_ sql: String, _ arguments: [SQLValue], decode: (SQLRow) throws(VerificationError) -> T)
        throws(VerificationError) -> [T]

    /// Inside a transaction: waits until no other transaction holds `key`, and holds it until this one
    /// ends. Serialises work on one purchase chain across instances even before its first row exists.
    func serializeTransaction(on key: String) throws(VerificationError)

    /// `serializeTransaction(on:)` without the wait: false if another transaction holds `key` now.
    func trySerializeTransaction(on key: String) throws(VerificationError) -> Bool

    /// One parameterless statement of transaction control (BEGIN, SAVEPOINT) that the engine may
    /// send together with the next statement run (PostgreSQL: one pipeline, one round trip for
    /// both); its failure is then reported by that statement, or by `flushDeferred`.
    func deferScript(_ sql: String, operation: String) throws(VerificationError)

    /// A write whose changed-row count nobody needs, deferred like `deferScript`; a constraint
    /// violation is a failure. Inside a transaction only: its failure must reach the caller before
    /// the work is taken as done (the next statement, `executeScript`, or `flushDeferred`).
    func deferWrite(_ sql: String, _ arguments: [SQLValue]) throws(VerificationError)

    /// Sends whatever is deferred, reporting its failure.
    func flushDeferred() throws(VerificationError)
}

/// An engine without a pipeline (SQLite, in-process) runs deferred statements at once.
extension SQLConnection {
    func deferScript(_ sql: String, operation: String) throws(VerificationError) {
        try executeScript(sql, operation: operation)
    }

    func deferWrite(_ sql: String, _ arguments: [SQLValue]) throws(VerificationError) {
        guard case .changed = try write(sql, arguments) else { throw SQLConnectionErrors.constraintViolated }
    }

    func flushDeferred() throws(VerificationError) {}
}

extension SQLConnection {
    /// A write where a constraint violation is a storage fault too; returns the number of changed rows.
    @discardableResult
    func run(_ sql: String, _ arguments: SQLValue...) throws(VerificationError) -> Int {
        switch try write(sql, arguments) {
        case .changed(let count): return count
        case .constraintViolation: throw SQLConnectionErrors.constraintViolated
        }
    }

    /// `deferWrite` with the arguments listed.
    func runDeferred(_ sql: String, _ arguments: SQLValue...) throws(VerificationError) {
        try deferWrite(sql, arguments)
    }

    func query<T>(_ sql: String, _ arguments: SQLValue..., decode: (SQLRow) throws(VerificationError) -> T)
        throws(VerificationError) -> [T] {
        try queryRows(sql, arguments, decode: decode)
    }
}

enum SQLConnectionErrors {
    /// A write broke a constraint where none may be: a storage fault.
    static let constraintViolated = VerificationError(.internalError, "storage: write failed (constraint violated)")
}

/// A storage engine's view of the current row.
protocol SQLRowSource {
    func isNull(_ column: Int32) -> Bool
    func integer(_ column: Int32) -> Int64?
    func text(_ column: Int32) -> String?
    func blob(_ column: Int32) -> Data?
}

/// The current row of a query; valid only inside the `decode` closure.
struct SQLRow {
    let source: any SQLRowSource

    func isNull(_ column: Int32) -> Bool { source.isNull(column) }
    func integer(_ column: Int32) -> Int64? { source.integer(column) }
    func text(_ column: Int32) -> String? { source.text(column) }
    func blob(_ column: Int32) -> Data? { source.blob(column) }

    /// A column the schema declares NOT NULL; NULL means the data was tampered with or corrupted.
    func requiredText(_ column: Int32) throws(VerificationError) -> String {
        guard let value = text(column) else { throw Self.corrupt }
        return value
    }

    func requiredInteger(_ column: Int32) throws(VerificationError) -> Int64 {
        guard let value = integer(column) else { throw Self.corrupt }
        return value
    }

    static let corrupt = VerificationError(.internalError, "storage: a stored row does not match the schema")
}

/// A database the ledger can use from any thread. Error messages name the operation and the
/// engine's generic text for the failure, never values and never the engine's detailed message
/// (which may quote them).
protocol SQLDatabase: Sendable {
    var dialect: SQLDialect { get }

    /// Runs `body` with exclusive use of one connection, outside any transaction.
    func withConnection<R: Sendable>(_ body: (any SQLConnection) throws(VerificationError) -> R)
        throws(VerificationError) -> R

    /// Runs `body` in one write transaction; any throw rolls everything back. Every commit (this one,
    /// and each statement run outside a transaction) is on stable storage when it returns, not only
    /// handed to the OS (SQLite `synchronous=FULL`, PostgreSQL `synchronous_commit` on). An engine may run
    /// `body` again after a transient conflict (a deadlock between instances), so `body` must have
    /// no effect outside the transaction.
    func transaction<R: Sendable>(_ body: (any SQLConnection) throws(VerificationError) -> R)
        throws(VerificationError) -> R
}
