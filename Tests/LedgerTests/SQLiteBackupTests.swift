import Foundation
import IAPCore
import XCTest
@testable import Ledger

/// `SQLiteBackup` on ledgers of other schema versions: a backup taken before an upgrade restores
/// (the gateway migrates it at its next start); one written by a newer build is refused.
final class SQLiteBackupTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapgw-backup-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
    }

    private func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    func testABackupOfAnOlderSchemaRestoresAndMigratesAtTheNextOpen() throws {
        let all = LedgerSchema.migrations(.sqlite)
        _ = try SQLiteDatabase(path: path("old.sqlite"), migrations: Array(all.prefix(12)))
        let backup = try SQLiteBackup.backup(from: path("old.sqlite"), to: path("old.backup"))
        XCTAssertNil(backup["idempotent_answers"], "a table of v13 is absent from a v12 ledger, not an error")
        XCTAssertEqual(backup["ownership"]?.rows, 0)
        let restored = try SQLiteBackup.restore(from: path("old.backup"), to: path("restored/iapgw.sqlite"))
        XCTAssertEqual(restored, backup)
        let migrated = try SQLiteDatabase(path: path("restored/iapgw.sqlite"), migrations: all)
        let version = try migrated.withConnection { (connection) throws(VerificationError) in
            try connection.query("SELECT MAX(version) FROM schema_migrations") { (row) throws(VerificationError) in
                try row.requiredInteger(0)
            }
        }
        XCTAssertEqual(version, [Int64(all.count)])
    }

    func testABackupWrittenByANewerBuildIsNotRestored() throws {
        _ = try SQLiteDatabase(path: path("new.sqlite"),
                               migrations: LedgerSchema.migrations(.sqlite) + ["CREATE TABLE later (id INTEGER PRIMARY KEY)"])
        XCTAssertThrowsError(try SQLiteBackup.restore(from: path("new.sqlite"), to: path("restored/iapgw.sqlite"))) { error in
            XCTAssertTrue(String(describing: error).contains("schema version"), "\(error)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("restored/iapgw.sqlite")))
    }
}
