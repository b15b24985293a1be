import AppleTrust
import Foundation
import IAPCore
import XCTest
@testable import Ledger

final class StorageTests: LedgerTestCase {
    private func schemaVersions(_ ledger: SQLLedger) throws -> [Int64] {
        try ledger.database.withConnection { (connection) throws(VerificationError) in
            try connection.query("SELECT version FROM schema_migrations ORDER BY version") {
                (row) throws(VerificationError) in try row.requiredInteger(0)
            }
        }
    }

    /// The versions of the released migrations: 1...n.
    private var released: [Int64] { (1...Int64(releasedMigrations.count)).map { $0 } }

    func testOpeningCreatesParentDirectoriesAndAcceptsAPlainPath() throws {
        try skipOnPostgres("files and directories")
        let path = directory.appendingPathComponent("a/b/ledger.sqlite").path
        let ledger = try SQLLedger(storage: path)
        try ledger.ping()
        XCTAssertTrue(FileManager.default.fileExists(atPath: path))
    }

    func testReopeningAppliesNoMigrationTwiceAndKeepsData() throws {
        do {
            let ledger = try openLedger()
            _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000")]))
            XCTAssertEqual(try schemaVersions(ledger), released)
        }
        let reopened = try openLedger()
        XCTAssertEqual(try schemaVersions(reopened), released)
        XCTAssertEqual(try reopened.owner(bundleId: "com.example.app", originalTransactionId: "1000"), "alice")
    }

    func testNewMigrationIsAppliedOnceOnTopOfExistingSchema() throws {
        _ = try openLedger()
        let upgraded = releasedMigrations + ["CREATE TABLE added_later (id INTEGER PRIMARY KEY)"]
        let ledger = try openLedger(migrations: upgraded)
        XCTAssertEqual(try schemaVersions(ledger), released + [Int64(released.count) + 1])
        XCTAssertEqual(try schemaVersions(try openLedger(migrations: upgraded)),
                       released + [Int64(released.count) + 1])
    }

    func testDatabaseFromANewerVersionIsRefused() throws {
        let upgraded = releasedMigrations + ["CREATE TABLE added_later (id INTEGER PRIMARY KEY)"]
        _ = try openLedger(migrations: upgraded)
        let storage = self.storage
        let error = errorThrown { () throws(VerificationError) in _ = try SQLLedger(storage: storage) }
        XCTAssertEqual(error?.code, .storageUnavailable)
        XCTAssertTrue(error?.message.contains("newer") ?? false)
    }

    func testFailedMigrationLeavesTheDatabaseAtItsPreviousVersion() throws {
        _ = try openLedger()
        let broken = releasedMigrations + ["CREATE TABLE half_done (id INTEGER); THIS IS NOT SQL"]
        XCTAssertThrowsError(try openLedger(migrations: broken)) { error in
            XCTAssertEqual((error as? VerificationError)?.code, .storageUnavailable)
        }
        let ledger = try openLedger()
        XCTAssertEqual(try schemaVersions(ledger), released)
        let leftovers = try ledger.database.withConnection { (connection) throws(VerificationError) in
            try connection.query(usesPostgres
                ? "SELECT table_name FROM information_schema.tables WHERE table_name = 'half_done' AND table_schema = current_schema()"
                : "SELECT name FROM sqlite_master WHERE name = 'half_done'") {
                (row) throws(VerificationError) in try row.requiredText(0)
            }
        }
        XCTAssertEqual(leftovers, [])
    }

    func testPathBelowARegularFileIsStorageUnavailable() throws {
        try skipOnPostgres("files and directories")
        let file = directory.appendingPathComponent("not-a-directory")
        try Data("x".utf8).write(to: file)
        XCTAssertEqual(errorCode { () throws(VerificationError) in
            _ = try SQLLedger(storage: "sqlite:" + file.appendingPathComponent("ledger.sqlite").path)
        }, .storageUnavailable)
    }

    func testFileThatIsNotADatabaseIsStorageUnavailable() throws {
        try skipOnPostgres("files and directories")
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: databasePath))
        let error = errorThrown { () throws(VerificationError) in _ = try SQLLedger(storage: databasePath) }
        XCTAssertEqual(error?.code, .storageUnavailable)
        XCTAssertEqual(error?.retryable, true)
    }

    func testEmptyStoragePathIsStorageUnavailable() throws {
        XCTAssertEqual(errorCode { () throws(VerificationError) in _ = try SQLLedger(storage: "sqlite:") },
                       .storageUnavailable)
    }

    func testStorageFailureMidClaimIsStorageUnavailableAndMentionsNoValues() throws {
        let ledger = try openLedger()
        // Simulates a damaged schema under a running gateway.
        try ledger.database.withConnection { (connection) throws(VerificationError) in
            try connection.executeScript("DROP TABLE transactions", operation: "test")
        }
        let error = errorThrown { () throws(VerificationError) in
            _ = try ledger.claim(claim("alice-secret-account", [transaction("1000", original: "1000")]))
        }
        XCTAssertEqual(error?.code, .storageUnavailable)
        XCTAssertFalse(error?.message.contains("alice-secret-account") ?? true)
        XCTAssertFalse(error?.message.contains("1000") ?? true)
        // All or nothing: the binding made before the failure was rolled back.
        XCTAssertNil(try ledger.owner(bundleId: "com.example.app", originalTransactionId: "1000"))
    }

    func testConstraintViolationIsReportedToTheCallerNotThrown() throws {
        let ledger = try openLedger()
        let sql = "INSERT INTO schema_migrations (version, applied_at) VALUES (1, 0)"
        let result = try ledger.database.withConnection { (connection) throws(VerificationError) in
            try connection.write(sql, [])
        }
        // SQLITE_CONSTRAINT_PRIMARYKEY (an extended code), or PostgreSQL's unique_violation SQLSTATE.
        XCTAssertEqual(result, .constraintViolation(usesPostgres ? "23505" : "1555"))
    }

    /// Issue 10 item 9: an answer that reports a state change is sent after its commit is on disk. SQLite
    /// syncs the WAL at every commit (synchronous=FULL = 2, not NORMAL's sync at checkpoints only);
    /// PostgreSQL waits for the WAL flush on every session of the pool, even when the URL (as here) or
    /// the role asks for synchronous_commit = off.
    func testEveryCommitOfTheLedgerWaitsForStableStorage() throws {
        let ledger: SQLLedger
        let query: String
        let durable: String
        if usesPostgres {
            ledger = try SQLLedger(storage: storage + "%20-csynchronous_commit%3Doff")
            (query, durable) = ("SELECT current_setting('synchronous_commit')", "on")
        } else {
            ledger = try openLedger()
            (query, durable) = ("PRAGMA synchronous", "2")
        }
        let read = { () throws -> String in
            try ledger.database.withConnection { (connection) throws(VerificationError) -> String in
                try connection.query(query) { (row) throws(VerificationError) in
                    row.text(0) ?? row.integer(0).map(String.init) ?? ""
                }.first ?? ""
            }
        }
        XCTAssertEqual(try read(), durable)
        _ = try ledger.issueNonce(bundleId: "com.example.app", account: "alice", ttlSeconds: 60, now: 1)
        XCTAssertEqual(try read(), durable, "after a commit")
        if usesPostgres {
            // A second connection of the pool, opened while the first is checked out, is set up the same.
            let second = try ledger.database.withConnection { (_) throws(VerificationError) -> String in
                do { return try read() } catch { throw VerificationError(.storageUnavailable, "\(error)") }
            }
            XCTAssertEqual(second, durable, "every connection of the pool")
        }
    }

    func testWALIsCopiedIntoTheDatabaseFileInTheBackgroundNotByTheWritersCommit() throws {
        try skipOnPostgres("the WAL checkpointer")
        let ledger = try openLedger()
        let file = databasePath
        let before = try fileSize(file)
        for i in 0..<600 {
            try ledger.recordAudit(AuditRecord(time: Int64(i), bundleId: "com.example.app", account: "alice",
                                               evidenceKind: "signedTransaction",
                                               evidenceSHA256: SHA256Digest.lowercaseHex("evidence-\(i)"),
                                               transactionIds: (0..<20).map { "\(i)-\($0)" }, productIds: ["p"],
                                               environment: "Production", verdict: .granted, errorCode: nil,
                                               adapter: "serverAPI", latencyMicros: 1))
        }
        // Far below the commit's own checkpoint threshold: only the background checkpointer moves pages.
        let deadline = Date().addingTimeInterval(5)
        while try fileSize(file) < before + 200_000, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        XCTAssertGreaterThan(try fileSize(file), before + 200_000, "the WAL was checkpointed into the file")
    }

    private func fileSize(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    }
}
