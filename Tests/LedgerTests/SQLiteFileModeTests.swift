import Foundation
import IAPCore
import XCTest
@testable import Ledger

/// The SQLite database holds accounts, bindings and sealed receipts: it and its WAL and SHM are
/// the owner's alone (0600), whatever the process umask would give a new file.
final class SQLiteFileModeTests: LedgerTestCase {
    private func mode(_ path: String) throws -> Int {
        try XCTUnwrap(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }

    func testANewDatabaseAndItsWALAndSHMAreCreated0600UnderAPermissiveUmask() throws {
        try skipOnPostgres("file modes")
        // 022 is the usual umask (new files 0644, readable by every local user); set it so the test
        // does not depend on the runner's.
        let previous = umask(0o022)
        defer { umask(previous) }
        let ledger = try SQLLedger(storage: "sqlite:" + databasePath)
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000")]))
        for path in [databasePath, databasePath + "-wal", databasePath + "-shm"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: path), path)
            XCTAssertEqual(try mode(path), 0o600, path)
        }
    }

    func testAnExistingDatabaseKeepsTheModeItsOperatorGaveIt() throws {
        try skipOnPostgres("file modes")
        do { _ = try SQLLedger(storage: "sqlite:" + databasePath) }
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: databasePath)
        let reopened = try SQLLedger(storage: "sqlite:" + databasePath)
        try reopened.ping()
        XCTAssertEqual(try mode(databasePath), 0o640)
    }
}
