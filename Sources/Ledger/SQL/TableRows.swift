import AppleTrust
import Foundation
import IAPCore

/// One ledger table's columns as a migrated SQLite file declares them (`pragma_table_info`): the
/// shape a copy and a digest read rows by, the same on either engine, since both run one schema.
struct TableShape: Sendable {
    enum Kind: Sendable { case integer, text, blob }

    struct Column: Sendable {
        let name: String
        let kind: Kind
        /// Position in the primary key (1-based); 0 for a column outside it.
        let keyPosition: Int
    }

    let table: String
    let columns: [Column]

    /// The primary key's columns in key order: rows are read in this order, a page at a time.
    var key: [Column] {
        columns.filter { $0.keyPosition > 0 }.sorted { $0.keyPosition < $1.keyPosition }
    }

    /// Read from an SQLite connection. A table without a primary key, or a column of a type the
    /// ledger never declares, is refused: its rows could not be paged or compared faithfully.
    static func read(_ table: String, on connection: any SQLConnection) throws(VerificationError) -> TableShape {
        let columns = try connection.query("SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid", .text(table)) {
            (row) throws(VerificationError) -> Column in
            let type = try row.requiredText(1).uppercased()
            let kind: Kind
            if type.contains("INT") {
                kind = .integer
            } else if type == "TEXT" {
                kind = .text
            } else if type == "BLOB" {
                kind = .blob
            } else {
                throw VerificationError(.internalError, "storage: table \(table) has a column of an unknown type")
            }
            return Column(name: try row.requiredText(0), kind: kind, keyPosition: Int(try row.requiredInteger(2)))
        }
        let shape = TableShape(table: table, columns: columns)
        guard !columns.isEmpty, !shape.key.isEmpty else {
            throw VerificationError(.internalError, "storage: table \(table) is missing or has no primary key")
        }
        return shape
    }

    /// Calls `body` with each page of rows (at most `pageSize`), in primary-key order, every value
    /// read by its declared kind. Pages continue after the last key seen, so a page costs one index
    /// seek however deep into the table it is. Text keys are ordered by their UTF-8 bytes on both
    /// engines (SQLite's BINARY; PostgreSQL's "C"), so both read one table in one order.
    func forEachPage(on connection: any SQLConnection, pageSize: Int = 500,
                     _ body: ([[SQLValue]]) throws(VerificationError) -> Void) throws(VerificationError) {
        let key = self.key
        let keyIndexes = key.map { column in columns.firstIndex { $0.name == column.name }! }
        let ordered = key.map { column -> String in
            column.kind == .text && connection.dialect == .postgres ? "\(column.name) COLLATE \"C\"" : column.name
        }
        let list = columns.map(\.name).joined(separator: ", ")
        let first = "SELECT \(list) FROM \(table) ORDER BY \(ordered.joined(separator: ", ")) LIMIT \(pageSize)"
        let next = "SELECT \(list) FROM \(table) WHERE (\(ordered.joined(separator: ", "))) > "
            + "(\(Array(repeating: "?", count: key.count).joined(separator: ", "))) "
            + "ORDER BY \(ordered.joined(separator: ", ")) LIMIT \(pageSize)"
        var after: [SQLValue]?
        while true {
            let page = try connection.queryRows(after == nil ? first : next, after ?? []) {
                (row) throws(VerificationError) -> [SQLValue] in values(of: row)
            }
            if !page.isEmpty { try body(page) }
            guard page.count == pageSize, let last = page.last else { return }
            after = keyIndexes.map { last[$0] }
        }
    }

    private func values(of row: SQLRow) -> [SQLValue] {
        columns.enumerated().map { index, column -> SQLValue in
            let i = Int32(index)
            guard !row.isNull(i) else { return .null }
            switch column.kind {
            case .integer: return .integer(row.integer(i))
            case .text: return .text(row.text(i))
            case .blob: return row.blob(i).map { .blob($0) } ?? .null
            }
        }
    }

    /// Inserts `rows` (in this shape's column order) in one statement.
    func insert(_ rows: [[SQLValue]], on connection: any SQLConnection) throws(VerificationError) {
        guard !rows.isEmpty else { return }
        let placeholders = "(" + Array(repeating: "?", count: columns.count).joined(separator: ", ") + ")"
        let sql = "INSERT INTO \(table) (\(columns.map(\.name).joined(separator: ", "))) VALUES "
            + Array(repeating: placeholders, count: rows.count).joined(separator: ", ")
        try connection.run(sql, rows.flatMap { $0 })
    }
}

/// What one table holds, in a form two databases can be compared by: its row count and a SHA-256
/// chained over every row in primary-key order (each value tagged with its kind and length, so no two
/// different rows encode alike).
public struct TableDigest: Sendable, Equatable {
    public let table: String
    public private(set) var rows: Int
    private var chain: [UInt8]

    public var sha256: String { Hex.lowercase(chain) }

    init(table: String) {
        self.table = table
        rows = 0
        chain = SHA256Digest.hash(Array(table.utf8))
    }

    mutating func add(_ page: [[SQLValue]]) {
        for row in page {
            var bytes = chain
            for value in row { Self.encode(value, into: &bytes) }
            chain = SHA256Digest.hash(bytes)
            rows += 1
        }
    }

    private static func encode(_ value: SQLValue, into bytes: inout [UInt8]) {
        func length(_ count: Int) { withUnsafeBytes(of: UInt64(count).bigEndian) { bytes += $0 } }
        switch value {
        case .null:
            bytes.append(0)
        case .integer(let number):
            bytes.append(1)
            withUnsafeBytes(of: number.bigEndian) { bytes += $0 }
        case .text(let text):
            bytes.append(2)
            length(text.utf8.count)
            bytes += text.utf8
        case .blob(let data):
            bytes.append(3)
            length(data.count)
            bytes += data
        }
    }

    /// The digest of `shape`'s table as `connection` reads it now.
    static func of(_ shape: TableShape, on connection: any SQLConnection) throws(VerificationError) -> TableDigest {
        var digest = TableDigest(table: shape.table)
        try shape.forEachPage(on: connection) { page in digest.add(page) }
        return digest
    }

    public var json: JSONValue { .object(["rows": .int(Int64(rows)), "sha256": .string(sha256)]) }
}

/// Every ledger table's digest, in `LedgerSchema.tables` order.
public struct LedgerDigest: Sendable, Equatable {
    public let tables: [TableDigest]

    public subscript(table: String) -> TableDigest? { tables.first { $0.table == table } }

    public var json: JSONValue {
        .object(Dictionary(uniqueKeysWithValues: tables.map { ($0.table, $0.json) }))
    }

    /// The shapes of every ledger table of a migrated SQLite file, refusing a file with a table
    /// the list does not name (a newer build's, or one added by hand): it would not be carried over.
    /// `upToDate` false: a file of an older schema (a backup from before an upgrade), whose tables
    /// added since are absent rather than missing.
    static func shapes(on connection: any SQLConnection, upToDate: Bool = true) throws(VerificationError) -> [TableShape] {
        let present = try connection.query("SELECT name FROM sqlite_master WHERE type = 'table'") {
            (row) throws(VerificationError) in try row.requiredText(0)
        }
        let unknown = Set(present).subtracting(LedgerSchema.tables).subtracting(LedgerSchema.engineTables)
        guard unknown.isEmpty else {
            throw VerificationError(.storageUnavailable,
                                    "storage: the database has tables this build does not know (\(unknown.sorted().joined(separator: ", ")))")
        }
        let listed = upToDate ? LedgerSchema.tables : LedgerSchema.tables.filter(present.contains)
        return try listed.map { (table) throws(VerificationError) in try TableShape.read(table, on: connection) }
    }

    static func of(_ shapes: [TableShape], on connection: any SQLConnection) throws(VerificationError) -> LedgerDigest {
        LedgerDigest(tables: try shapes.map { (shape) throws(VerificationError) in try TableDigest.of(shape, on: connection) })
    }
}
