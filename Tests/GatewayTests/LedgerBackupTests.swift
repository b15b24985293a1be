import Foundation
import IAPCore
import Synchronization
import TestSupport
import XCTest

/// `iapgw backup` and `iapgw restore` (the built binary) on the ledger of a gateway serving real
/// claims over HTTP (purchases the simulator signs with its test PKI).
final class LedgerBackupTests: XCTestCase {
    /// Claims answered 200 before the backup started are all in it; everything in it was answered
    /// 200; the restored file passes `integrity_check`; a gateway on it serves the same entitlements.
    func testABackupTakenUnderLoadRestoresWhatWasAnswered() async throws {
        let gw = try await GatewayE2E.start(self)
        let answered = AnsweredClaims()
        try await Self.claim(on: gw, accounts: (0..<12).map { "before-\($0)" }, into: answered)
        let before = Set(answered.keys)
        XCTAssertEqual(before.count, 12)

        let stop = AnsweredClaims()
        let load = Task { [gw, answered, stop] in try await LedgerBackupTests.claimUntilStopped(on: gw, into: answered, until: stop) }
        let backupFile = gw.harness.directory.appendingPathComponent("ledger.backup").path
        let atStart = Set(answered.keys)
        let backup = try await Self.iapgw(["backup", "--from", "sqlite:" + gw.sqlitePath, "--to", backupFile])
        stop.stop()
        try await load.value
        let all = Set(answered.keys)
        XCTAssertEqual(backup.status, 0, backup.stderr)
        let reported = try XCTUnwrap(try StrictJSON().parse(Array(backup.stdout.utf8))["tables"]?["ownership"]?["rows"]?.intValue)

        let restored = gw.harness.directory.appendingPathComponent("restored/iapgw.sqlite").path
        let restore = try await Self.iapgw(["restore", "--from", backupFile, "--to", "sqlite:" + restored])
        XCTAssertEqual(restore.status, 0, restore.stderr)
        XCTAssertEqual(try Self.sqlite(restored, "PRAGMA integrity_check"), ["ok"])
        let owned = Set(try Self.sqlite(restored, "SELECT ownership_key FROM ownership"))
        XCTAssertEqual(owned.count, Int(reported), "the backup's report counts what was restored")
        XCTAssertTrue(atStart.isSubset(of: owned), "every claim answered before the backup is in it")
        XCTAssertTrue(owned.isSubset(of: all), "everything in the backup was answered 200")
        let audited = try XCTUnwrap(Int(try Self.sqlite(restored, "SELECT count(*) FROM audit_log WHERE verdict = 'granted'").first ?? ""))
        XCTAssertGreaterThanOrEqual(audited, atStart.count)
        XCTAssertLessThanOrEqual(audited, all.count)

        let answeredBefore = try await gw.entitlements("before-3")
        let onRestored = try await GatewayE2E.start(self) { $0.storageURL = "sqlite:" + restored }
        let servedAfter = try await onRestored.entitlements("before-3")
        XCTAssertEqual(servedAfter.count, 1)
        XCTAssertEqual(servedAfter, answeredBefore)
    }

    /// Refused while a gateway serves the file (its instance lock) and while another process has it
    /// open (an `sqlite3` shell); the ledger in use is left as it was. Once nothing uses it, the
    /// restore replaces it and keeps the old file aside.
    func testRestoreRefusesALedgerInUse() async throws {
        let (gw, backupFile) = try await gatewayWithABackup(of: "alice")
        try await Self.claim(on: gw, accounts: ["bob"], into: AnsweredClaims())

        let refused = try await Self.iapgw(["restore", "--from", backupFile, "--to", "sqlite:" + gw.sqlitePath])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains("in use (a gateway holds its instance lock)"), refused.stderr)
        XCTAssertFalse(refused.stderr.contains(gw.sqlitePath), "no file path in the refusal")
        let bob = try await gw.entitlements("bob")
        XCTAssertEqual(bob.count, 1, "the served ledger is untouched")

        let path = gw.harness.directory.appendingPathComponent("other/iapgw.sqlite").path
        let first = try await Self.iapgw(["restore", "--from", backupFile, "--to", path])
        XCTAssertEqual(first.status, 0, first.stderr)
        let shell = try SQLiteShell(path)
        let held = try await Self.iapgw(["restore", "--from", backupFile, "--to", path])
        XCTAssertEqual(held.status, 1)
        XCTAssertTrue(held.stderr.contains("in use (another process has it open)"), held.stderr)
        shell.close()
        let again = try await Self.iapgw(["restore", "--from", backupFile, "--to", path])
        XCTAssertEqual(again.status, 0, again.stderr)
        let aside = try FileManager.default.contentsOfDirectory(atPath: URL(fileURLWithPath: path).deletingLastPathComponent().path)
            .filter { $0.hasPrefix("iapgw.sqlite.replaced-") && !$0.hasSuffix("-wal") }
        XCTAssertEqual(aside.count, 1, "the replaced ledger is kept: \(aside)")
    }

    /// A backup that fails its integrity check is never restored.
    func testACorruptBackupIsRefusedBeforeAnythingIsReplaced() async throws {
        let (gw, backupFile) = try await gatewayWithABackup(of: "alice")
        // Overwrite a page in the middle of the file: the b-trees no longer agree with their pages.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: backupFile))
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: size / 2)
        handle.write(Data(repeating: 0xA5, count: 4096))
        try handle.close()
        let target = gw.harness.directory.appendingPathComponent("target/iapgw.sqlite").path
        let refused = try await Self.iapgw(["restore", "--from", backupFile, "--to", target])
        XCTAssertEqual(refused.status, 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: target), refused.stderr)
    }

    // MARK: Helpers

    /// A gateway whose ledger holds `account`'s claim, and a backup of it taken with `iapgw backup`.
    private func gatewayWithABackup(of account: String) async throws -> (GatewayE2E, String) {
        let gw = try await GatewayE2E.start(self)
        try await Self.claim(on: gw, accounts: [account], into: AnsweredClaims())
        let backupFile = gw.harness.directory.appendingPathComponent("ledger.backup").path
        let backup = try await Self.iapgw(["backup", "--from", "sqlite:" + gw.sqlitePath, "--to", backupFile])
        XCTAssertEqual(backup.status, 0, backup.stderr)
        return (gw, backupFile)
    }

    /// One purchase per account, claimed over HTTP; each claim answered 200 adds its purchase's key.
    private static func claim(on gw: GatewayE2E, accounts: [String], into answered: AnsweredClaims) async throws {
        for account in accounts {
            let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-\(account)")
            let answer = try await gw.verifyTransactionId(purchase.transactionId, account: account)
            XCTAssertEqual(answer.status, 200, answer.text)
            if answer.status == 200 { answered.add(purchase.originalTransactionId) }
        }
    }

    /// Four clients claiming fresh purchases one after another until `stop`.
    private static func claimUntilStopped(on gw: GatewayE2E, into answered: AnsweredClaims, until stop: AnsweredClaims) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<4 {
                group.addTask {
                    var n = 0
                    while !stop.stopped {
                        try await claim(on: gw, accounts: ["load-\(worker)-\(n)"], into: answered)
                        n += 1
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// The built `iapgw`, run on a thread of its own (its wait blocks).
    static func iapgw(_ arguments: [String]) async throws -> ProcessRun {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try ProcessRun.run(GatewayProcess.binary.path, arguments) }) }.start()
        }
    }

    static func sqlite(_ path: String, _ sql: String) throws -> [String] {
        let run = try ProcessRun.run("/usr/bin/sqlite3", ["-readonly", path, sql])
        guard run.status == 0 else { throw GatewayProcessError(message: "sqlite3: \(run.stderr)") }
        return run.stdout.split(separator: "\n").map(String.init)
    }
}

/// The purchases whose claims were answered 200, and the load's stop signal.
private final class AnsweredClaims: Sendable {
    private let state = Mutex((keys: [String](), stopped: false))
    func add(_ key: String) { state.withLock { $0.keys.append(key) } }
    var keys: [String] { state.withLock { $0.keys } }
    func stop() { state.withLock { $0.stopped = true } }
    var stopped: Bool { state.withLock { $0.stopped } }
}

/// An `sqlite3` shell with the file open (it has read from it), until `close`.
private final class SQLiteShell {
    private let process = Process()
    private let input = Pipe()

    init(_ path: String) throws {
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [path]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        input.fileHandleForWriting.write(Data("SELECT count(*) FROM ownership;\n".utf8))
        // Its answer proves the file is open and read (SQLite maps the WAL index on the first read).
        _ = output.fileHandleForReading.availableData
    }

    func close() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
