import Foundation
import IAPConfig
import IAPCore

/// The move of a ledger from SQLite (one instance) to PostgreSQL (several): every row of every
/// ledger table (`LedgerSchema.tables`) copied in one PostgreSQL transaction, then read back from
/// both databases and compared table by table (row count and `TableDigest`). Blocks its thread
/// for the whole copy: callers run it on a thread of their own.
public enum StorageMigration {
    public struct Report: Sendable {
        public let source: LedgerDigest
        public let destination: LedgerDigest

        public var json: JSONValue {
            .object(["tables": source.json, "verified": .bool(source == destination)])
        }
    }

    /// Copies the SQLite ledger at `sqlitePath` into the PostgreSQL database at `postgresURL`.
    ///
    /// Refused, with nothing written: a source that is in use (`SQLiteFileClaim`: a gateway still
    /// writing would add rows after the copy), a destination that holds any ledger row already (a
    /// merge would be a second owner per purchase), and a source with a table this build does not
    /// know. Each side is brought to this build's schema first. Numbering carries over: PostgreSQL's
    /// identity sequences continue after the highest id SQLite ever handed out.
    /// `deadline`: the longest any one PostgreSQL statement or wait may last.
    public static func copy(fromSQLite sqlitePath: String, toPostgres postgresURL: String,
                            deadline: Duration = .seconds(60)) throws(VerificationError) -> Report {
        guard FileManager.default.fileExists(atPath: sqlitePath) else {
            throw VerificationError(.storageUnavailable, "storage: no SQLite ledger at the migration's source")
        }
        guard case .postgres = LedgerStorage(postgresURL) else {
            throw VerificationError(.invalidConfiguration, "storage: the destination must be a postgres:// URL")
        }
        let claim = try SQLiteFileClaim.claim(sqlitePath).get()
        return try withExtendedLifetime(claim) { () throws(VerificationError) -> Report in
            let source = try SQLiteDatabase(path: sqlitePath, migrations: LedgerSchema.migrations(.sqlite))
            let destination = try PostgresDatabase(url: postgresURL, migrations: LedgerSchema.migrations(.postgres),
                                                   maxConnections: 1, waitMilliseconds: max(1, Int(deadline / .milliseconds(1))))
            return try source.withConnection { (reader) throws(VerificationError) -> Report in
                // One read transaction: every table as of one commit.
                try reader.executeScript("BEGIN", operation: "begin the copy")
                defer { try? reader.executeScript("COMMIT", operation: "end the copy") }
                let shapes = try LedgerDigest.shapes(on: reader)
                let copied = try destination.transaction { (writer) throws(VerificationError) -> LedgerDigest in
                    try refuseRows(in: shapes, on: writer)
                    var digests: [TableDigest] = []
                    for shape in shapes {
                        var digest = TableDigest(table: shape.table)
                        try shape.forEachPage(on: reader) { (page) throws(VerificationError) in
                            try shape.insert(page, on: writer)
                            digest.add(page)
                        }
                        digests.append(digest)
                    }
                    try continueNumbering(shapes, after: reader, on: writer)
                    return LedgerDigest(tables: digests)
                }
                let readBack = try destination.withConnection { (connection) throws(VerificationError) in
                    try LedgerDigest.of(shapes, on: connection)
                }
                for (mine, theirs) in zip(copied.tables, readBack.tables) where mine != theirs {
                    throw VerificationError(.storageUnavailable,
                                            "storage: table \(mine.table) differs after the copy (\(mine.rows) rows copied, \(theirs.rows) read back)")
                }
                return Report(source: copied, destination: readBack)
            }
        }
    }

    private static func refuseRows(in shapes: [TableShape], on connection: any SQLConnection) throws(VerificationError) {
        for shape in shapes {
            let any = try connection.query("SELECT 1 FROM \(shape.table) LIMIT 1") { (_) throws(VerificationError) in true }
            guard any.isEmpty else {
                throw VerificationError(.invalidConfiguration,
                                        "storage: the PostgreSQL ledger already holds rows (table \(shape.table)): migrate into an empty database")
            }
        }
    }

    /// Each table SQLite numbers (AUTOINCREMENT: `sqlite_sequence`) continues on PostgreSQL after the
    /// highest number SQLite handed out, which may be above the highest one left (a purge of the newest rows).
    private static func continueNumbering(_ shapes: [TableShape], after reader: any SQLConnection,
                                          on writer: any SQLConnection) throws(VerificationError) {
        let sequences = try reader.query("SELECT name, seq FROM sqlite_sequence") { (row) throws(VerificationError) in
            (try row.requiredText(0), try row.requiredInteger(1))
        }
        for (table, seq) in sequences {
            guard let shape = shapes.first(where: { $0.table == table }), shape.key.count == 1 else { continue }
            let column = shape.key[0].name
            let highest = try writer.query("SELECT COALESCE(MAX(\(column)), 0) FROM \(table)") {
                (row) throws(VerificationError) in try row.requiredInteger(0)
            }.first ?? 0
            let last = max(seq, highest)
            guard last > 0 else { continue }
            _ = try writer.query("SELECT setval(pg_get_serial_sequence('\(table)', '\(column)'), ?)", .integer(last)) {
                (_) throws(VerificationError) in 0
            }
        }
    }
}
