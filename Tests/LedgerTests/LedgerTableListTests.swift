import Foundation
import IAPCore
import XCTest
@testable import Ledger

/// The one list of the ledger's tables (`LedgerSchema.tables`) against what the migrations make:
/// a table added by a migration and not listed would be left out of every backup report and of
/// `iapgw migrate-storage`, so it fails here first.
final class LedgerTableListTests: XCTestCase {
    func testTheTableListNamesEveryTableTheMigrationsCreate() throws {
        let database = try migratedFile()
        let (present, shapes) = try database.withConnection { (connection) throws(VerificationError) in
            (try connection.query("SELECT name FROM sqlite_master WHERE type = 'table'") {
                (row) throws(VerificationError) in try row.requiredText(0)
            }, try LedgerDigest.shapes(on: connection))
        }
        XCTAssertEqual(Set(present).subtracting(LedgerSchema.engineTables), Set(LedgerSchema.tables))
        XCTAssertEqual(LedgerSchema.tables.count, Set(LedgerSchema.tables).count, "each table once")
        XCTAssertEqual(shapes.map(\.table), LedgerSchema.tables)
        XCTAssertTrue(shapes.allSatisfy { !$0.key.isEmpty }, "every table pages by its primary key")
    }

    /// Parents first: a copy in list order never inserts a row before the row its foreign key names.
    func testEveryForeignKeyNamesATableListedBeforeIt() throws {
        let database = try migratedFile()
        var checked = 0
        for (index, table) in LedgerSchema.tables.enumerated() {
            let parents = try database.withConnection { (connection) throws(VerificationError) in
                try connection.query("SELECT \"table\" FROM pragma_foreign_key_list(?)", .text(table)) {
                    (row) throws(VerificationError) in try row.requiredText(0)
                }
            }
            for parent in parents {
                let position = try XCTUnwrap(LedgerSchema.tables.firstIndex(of: parent), parent)
                XCTAssertLessThan(position, index, "\(table) references \(parent)")
                checked += 1
            }
        }
        XCTAssertGreaterThanOrEqual(checked, 4, "the schema's foreign keys were read")
    }

    /// A table the list does not know is refused, not skipped.
    func testAFileWithAnUnknownTableIsRefused() throws {
        let database = try migratedFile(extra: ["CREATE TABLE extra (id INTEGER PRIMARY KEY)"])
        XCTAssertThrowsError(try database.withConnection { (connection) throws(VerificationError) in
            try LedgerDigest.shapes(on: connection)
        }) { error in
            XCTAssertTrue(String(describing: error).contains("extra"), "\(error)")
        }
    }

    /// A fresh SQLite file with every migration (and `extra` after them), removed when the test ends.
    private func migratedFile(extra: [String] = []) throws -> SQLiteDatabase {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapgw-tables-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        return try SQLiteDatabase(path: directory.appendingPathComponent("l.sqlite").path,
                                  migrations: LedgerSchema.migrations(.sqlite) + extra)
    }
}
