import CLibPQ
import Foundation
import Glibc
import IAPCore
import Synchronization

/// One libpq connection, used by one thread at a time (`PostgresDatabase` hands it out).
///
/// Error messages name the operation and the SQLSTATE with its class's generic meaning, never
/// `PQerrorMessage`/`PQresultErrorMessage`: those may quote values, keys or the connection's password.
final class PostgresConnection: GroupCommitConnection, @unchecked Sendable {
    var dialect: SQLDialect { .postgres }
    private let handle: OpaquePointer
    /// Server-side prepared statements of this session, by the ledger's SQL text (`?` placeholders).
    private var statements: [String: PreparedStatement] = [:]
    /// The SQLSTATE of the last failed statement ("" if it failed without one, e.g. a lost connection).
    private(set) var lastFailureState: String?
    /// Statements deferred to go in one pipeline with the next one sent (`deferScript`, `deferWrite`).
    private var deferred: [Outgoing] = []
    /// Set when a pipeline broke off in a way that leaves the session's state unknown: the pool drops it.
    private var abandoned = false
    private let roundTrips: RoundTripCounter?
    /// The locks (`serializeTransaction`) this session's open transaction holds: taking one again
    /// would cost a round trip and change nothing. Forgotten whenever a transaction or savepoint
    /// ends, or a savepoint rolls back (that may release what it took; a RELEASE hands them on).
    private var heldLocks: Set<String> = []

    private struct PreparedStatement {
        let name: String
        let parameterCount: Int
    }

    /// A statement ready to send: a prepared one with its parameters, or (no `prepared`) one
    /// parameterless statement of transaction control sent as text.
    private struct Outgoing {
        let prepared: PreparedStatement?
        let text: String
        let parameters: PostgresParameters
        let operation: String
    }

    private init(handle: OpaquePointer, roundTrips: RoundTripCounter?) {
        self.handle = handle
        self.roundTrips = roundTrips
    }

    deinit { PQfinish(handle) }

    /// Connects with `url` (a libpq URI: `postgres://user:password@host:port/db?options=...`).
    /// Settings in the URL win over the defaults here (a shorter connect timeout, another name).
    static func open(url: String, connectTimeoutSeconds: Int = 5,
                     roundTrips: RoundTripCounter? = nil) throws(VerificationError) -> PostgresConnection {
        let keywords = ["application_name", "connect_timeout", "dbname"]
        let values = ["iapgw", String(connectTimeoutSeconds), url]
        let handle = withCStrings(keywords) { keywordPointers in
            withCStrings(values) { valuePointers in
                // expand_dbname = 1: the dbname value is read as a URI; later entries override earlier ones.
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
        guard let handle else {
            throw VerificationError(.storageUnavailable, "storage: connect to PostgreSQL failed (out of memory)")
        }
        guard PQstatus(handle) == CONNECTION_OK else {
            let needsPassword = PQconnectionNeedsPassword(handle) == 1
            PQfinish(handle)
            throw VerificationError(.storageUnavailable, needsPassword
                ? "storage: connect to PostgreSQL failed (the server requires a password the URL does not give)"
                : "storage: connect to PostgreSQL failed (server unreachable, or it refused the connection or the URL)")
        }
        // libpq prints server notices ("relation already exists, skipping") to stderr by default:
        // that would break the JSON-lines log, and a notice may quote names or values. Dropped.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        let connection = PostgresConnection(handle: handle, roundTrips: roundTrips)
        // A 200 reports a commit that is on disk: a role, database or URL (`options=-c...`) default of
        // synchronous_commit = off would let COMMIT return before the WAL flush, so this session turns
        // it back on. Every other value (on, local, remote_write, remote_apply) flushes locally first.
        try connection.executeScript(
            "SELECT set_config('synchronous_commit', 'on', false) WHERE current_setting('synchronous_commit') = 'off'",
            operation: "configure")
        return connection
    }

    /// False once the session is gone (server restarted, backend terminated): the pool drops it.
    /// An idle session never has anything to read; readable means the server said goodbye or closed it.
    var isUsable: Bool {
        guard !isBroken, deferred.isEmpty, PQtransactionStatus(handle) == PQTRANS_IDLE else { return false }
        var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
        guard descriptor.fd >= 0 else { return false }
        return poll(&descriptor, 1, 0) == 0
    }

    var isBroken: Bool { abandoned || PQstatus(handle) != CONNECTION_OK }

    /// Inside a transaction block, failed or not (the batch must roll back to its savepoint).
    var inTransaction: Bool {
        let status = PQtransactionStatus(handle)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR
    }

    var lastFailureIsTransient: Bool { ["40001", "40P01"].contains(lastFailureState ?? "") }

    /// The server reported the failure with a SQLSTATE of its own.
    var lastFailureWasAnswered: Bool { !(lastFailureState ?? "").isEmpty }

    // MARK: SQLConnection

    func executeScript(_ sql: String, operation: String) throws(VerificationError) {
        forgetLocksIfEnding(sql)
        if sql == "ROLLBACK" {
            // Ends the transaction: what was deferred inside it would be undone anyway.
            deferred.removeAll()
        } else if !deferred.isEmpty {
            // One statement goes in the pipeline; a script (several) only after it (the pipeline
            // carries one statement per message).
            guard sql.contains(";") else {
                let result = try pipeline(then: [Outgoing(prepared: nil, text: sql, parameters: PostgresParameters(), operation: operation)]).first ?? nil
                defer { PQclear(result) }
                try check(result, operation)
                return
            }
            try flushDeferred()
        }
        roundTrips?.count()
        let result = PQexec(handle, sql)
        defer { PQclear(result) }
        try check(result, operation)
    }

    func deferScript(_ sql: String, operation: String) throws(VerificationError) {
        guard !sql.contains(";") else { return try executeScript(sql, operation: operation) }
        forgetLocksIfEnding(sql)
        deferred.append(Outgoing(prepared: nil, text: sql, parameters: PostgresParameters(), operation: operation))
    }

    func deferWrite(_ sql: String, _ arguments: [SQLValue]) throws(VerificationError) {
        deferred.append(try outgoing(sql, arguments, operation: "write"))
    }

    func flushDeferred() throws(VerificationError) {
        guard !deferred.isEmpty else { return }
        _ = try pipeline(then: [])
    }

    /// In one pipeline after whatever is deferred: one round trip for all the reads.
    func queryEach(_ reads: [SQLRead]) throws(VerificationError) {
        let statements = try reads.map { (read) throws(VerificationError) in try outgoing(read.sql, read.arguments, operation: "read") }
        let results = try pipeline(then: statements)
        defer { results.forEach { PQclear($0) } }
        for (read, result) in zip(reads, results) {
            try check(result, "read")
            for index in 0..<PQntuples(result) { try read.row(SQLRow(source: PostgresRow(result: result, row: index))) }
        }
    }

    func write(_ sql: String, _ arguments: [SQLValue]) throws(VerificationError) -> WriteResult {
        let result = try execute(sql, arguments, operation: "write")
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        if status == PGRES_FATAL_ERROR, let state = Self.sqlState(result), state.hasPrefix("23") {
            lastFailureState = state
            return .constraintViolation(state)
        }
        try check(result, "write")
        let changed = PQcmdTuples(result).map { String(cString: $0) } ?? ""
        return .changed(Int(changed) ?? 0)
    }

    func queryRows<T>(_ sql: String, _ arguments: [SQLValue], decode: (SQLRow) throws(VerificationError) -> T)
        throws(VerificationError) -> [T] {
        let result = try execute(sql, arguments, operation: "read")
        defer { PQclear(result) }
        try check(result, "read")
        let count = PQntuples(result)
        var rows: [T] = []
        rows.reserveCapacity(Int(count))
        for index in 0..<count {
            rows.append(try decode(SQLRow(source: PostgresRow(result: result, row: index))))
        }
        return rows
    }

    /// A transaction-scoped advisory lock on a 64-bit hash of `key`: released by COMMIT or ROLLBACK,
    /// so a crashed instance never leaves one behind. A hash collision only serialises more than needed.
    func serializeTransaction(on key: String) throws(VerificationError) {
        try serializeTransaction(onEach: [key])
    }

    /// One statement: PostgreSQL evaluates a target list left to right, so the locks are taken in
    /// `keys`' order.
    func serializeTransaction(onEach keys: [String]) throws(VerificationError) {
        if deferred.isEmpty, PQtransactionStatus(handle) == PQTRANS_IDLE { heldLocks.removeAll() }
        let keys = keys.filter { !heldLocks.contains($0) }
        guard !keys.isEmpty else { return }
        let locks = Array(repeating: "pg_advisory_xact_lock(hashtextextended(?, 0))", count: keys.count)
        _ = try queryRows("SELECT " + locks.joined(separator: ", "), keys.map(SQLValue.text)) { (_) throws(VerificationError) in () }
        heldLocks.formUnion(keys)
    }

    /// One statement, one row, a column per key (a prepared statement per number of keys).
    func trySerializeTransaction(on keys: [String]) throws(VerificationError) -> Set<String> {
        guard !keys.isEmpty else { return [] }
        let locks = Array(repeating: "pg_try_advisory_xact_lock(hashtextextended(?, 0))", count: keys.count)
        let granted = try queryRows("SELECT " + locks.joined(separator: ", "), keys.map(SQLValue.text)) {
            (row) throws(VerificationError) in
            try (0..<Int32(keys.count)).map { (column) throws(VerificationError) in try row.requiredText(column) == "t" }
        }.first ?? []
        let held = Set(zip(keys, granted).compactMap { $0.1 ? $0.0 : nil })
        heldLocks.formUnion(held)
        return held
    }

    /// Marks the start of a transaction attempt, so the database can tell a transient conflict of
    /// this attempt from an older failure.
    func resetFailure() { lastFailureState = nil }

    private func forgetLocksIfEnding(_ sql: String) {
        if ["BEGIN", "COMMIT", "ROLLBACK", "END", "ABORT"].contains(where: sql.hasPrefix) { heldLocks.removeAll() }
    }

    // MARK: Statements

    /// Runs the cached prepared statement for `sql` (preparing it on first use in this session),
    /// after the deferred statements, in one pipeline with them if there are any. Integers and text
    /// go in text format (the server converts to the inferred type), blobs in binary; results come
    /// back in text format. The caller checks (and clears) the result.
    private func execute(_ sql: String, _ arguments: [SQLValue], operation: String) throws(VerificationError)
        -> OpaquePointer? {
        let statement = try outgoing(sql, arguments, operation: operation)
        guard deferred.isEmpty, let prepared = statement.prepared else { return try pipeline(then: [statement]).first ?? nil }
        roundTrips?.count()
        return statement.parameters.withLibPQArrays { count, values, lengths, formats in
            PQexecPrepared(handle, prepared.name, count, values, lengths, formats, 0)
        }
    }

    private func outgoing(_ sql: String, _ arguments: [SQLValue], operation: String) throws(VerificationError) -> Outgoing {
        let statement = try prepared(sql)
        guard statement.parameterCount == arguments.count else {
            throw VerificationError(.internalError, "storage: bind failed (wrong number of parameters)")
        }
        return Outgoing(prepared: statement, text: sql, parameters: try PostgresParameters(arguments), operation: operation)
    }

    /// Sends the deferred statements and `finals` in one pipeline (libpq's pipeline mode: one round
    /// trip for all) and returns `finals`' results for the caller to check and clear. A deferred
    /// statement that failed is the error thrown (the server skipped everything after it, `finals`
    /// too), so a failure is reported by the next statement the caller runs, never lost.
    private func pipeline(then finals: [Outgoing]) throws(VerificationError) -> [OpaquePointer?] {
        let queue = deferred + finals
        deferred.removeAll()
        guard let last = queue.last else { return [] }
        roundTrips?.count()
        guard PQenterPipelineMode(handle) == 1 else {
            lastFailureState = ""
            throw Self.storageError(last.operation, state: nil, connectionLost: true)
        }
        var sent = true
        for statement in queue where sent { sent = send(statement) }
        sent = sent && PQpipelineSync(handle) == 1
        var failure: (operation: String, state: String?)?
        var finalResults: [OpaquePointer?] = []
        let firstFinal = queue.count - finals.count
        for (index, statement) in queue.enumerated() where sent {
            guard let result = PQgetResult(handle) else {
                sent = false
                break
            }
            while let extra = PQgetResult(handle) { PQclear(extra) }
            if index >= firstFinal {
                finalResults.append(result)
                continue
            }
            let status = PQresultStatus(result)
            if failure == nil, status != PGRES_COMMAND_OK, status != PGRES_TUPLES_OK {
                failure = (statement.operation, Self.sqlState(result))
            }
            PQclear(result)
        }
        if sent {
            let sync = PQgetResult(handle)
            sent = PQresultStatus(sync) == PGRES_PIPELINE_SYNC
            PQclear(sync)
        }
        // Out of step with the server (a send failed, a result missing): nothing more can be trusted
        // on this session.
        if !sent || PQexitPipelineMode(handle) != 1 { abandoned = true }
        if let failure {
            finalResults.forEach { PQclear($0) }
            lastFailureState = failure.state ?? ""
            // As `SQLConnection.run` reports it: a deferred write has no violation its caller handles.
            if failure.state?.hasPrefix("23") == true { throw SQLConnectionErrors.constraintViolated }
            throw Self.storageError(failure.operation, state: failure.state, connectionLost: isBroken)
        }
        guard sent else {
            finalResults.forEach { PQclear($0) }
            lastFailureState = ""
            throw Self.storageError(last.operation, state: nil, connectionLost: true)
        }
        return finalResults
    }

    private func send(_ statement: Outgoing) -> Bool {
        guard let prepared = statement.prepared else {
            return PQsendQueryParams(handle, statement.text, 0, nil, nil, nil, nil, 0) == 1
        }
        return statement.parameters.withLibPQArrays { count, values, lengths, formats in
            PQsendQueryPrepared(handle, prepared.name, count, values, lengths, formats, 0)
        } == 1
    }

    private func prepared(_ sql: String) throws(VerificationError) -> PreparedStatement {
        if let cached = statements[sql] { return cached }
        let (text, count) = Self.numberedPlaceholders(sql)
        let statement = PreparedStatement(name: "iapgw_\(statements.count + 1)", parameterCount: count)
        // No parameter types: the server infers each from its use (a CAST where it cannot).
        roundTrips?.count()
        let result = PQprepare(handle, statement.name, text, 0, nil)
        defer { PQclear(result) }
        try check(result, "prepare")
        statements[sql] = statement
        return statement
    }

    /// `?` → `$1…$n`, left to right. A `?` inside a quoted literal or identifier stays as it is (the
    /// ledger writes none, but a literal must never turn into a parameter).
    static func numberedPlaceholders(_ sql: String) -> (text: String, count: Int) {
        var out = ""
        out.reserveCapacity(sql.utf8.count + 16)
        var count = 0
        var quote: Character?
        for character in sql {
            if let open = quote {
                if character == open { quote = nil }
                out.append(character)
            } else if character == "'" || character == "\"" {
                quote = character
                out.append(character)
            } else if character == "?" {
                count += 1
                out += "$\(count)"
            } else {
                out.append(character)
            }
        }
        return (out, count)
    }

    // MARK: Errors

    private func check(_ result: OpaquePointer?, _ operation: String) throws(VerificationError) {
        let status = PQresultStatus(result)
        if result != nil, status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY {
            // COMMIT of a transaction an unseen error aborted rolls it back and still "succeeds".
            guard operation == "commit", String(cString: PQcmdStatus(result)) != "COMMIT" else { return }
            lastFailureState = "25P02"
            throw Self.storageError(operation, state: "25P02", connectionLost: false)
        }
        let state = Self.sqlState(result)
        lastFailureState = state ?? ""
        throw Self.storageError(operation, state: state, connectionLost: isBroken)
    }

    private static func sqlState(_ result: OpaquePointer?) -> String? {
        guard let result, let field = PQresultErrorField(result, IAPGW_PG_DIAG_SQLSTATE) else { return nil }
        return String(cString: field)
    }
}
