import CSQLite
import Foundation
import IAPCore

/// Backups of an SQLite ledger through SQLite's online backup API, and their restore. Each call
/// blocks its thread for the whole copy: callers run it on a thread of their own.
///
/// A backup copies every page in one step, so it reads one snapshot (one WAL read transaction):
/// writers carry on meanwhile (WAL lets them) and the copy is the ledger as of one commit, never a
/// mix of two. The copy is written beside its destination, checked (`PRAGMA integrity_check`),
/// synced and renamed into place, so the destination is either the previous file or a whole backup.
public enum SQLiteBackup {
    /// Copies the ledger at `source` (an existing SQLite ledger, possibly served meanwhile) to the
    /// file `destination` (replaced if present), and answers with what the copy holds.
    public static func backup(from source: String, to destination: String) throws(VerificationError) -> LedgerDigest {
        guard FileManager.default.fileExists(atPath: source) else {
            throw VerificationError(.storageUnavailable, "storage: no SQLite ledger at the backup's source")
        }
        let from = try openFile(source, flags: SQLITE_OPEN_READWRITE)
        return try writeChecked(destination, journalMode: "DELETE") { (into) throws(VerificationError) in try copy(from, into) }
    }

    /// Replaces the ledger at `path` with the backup `backupFile`, unless the ledger is in use
    /// (`SQLiteFileClaim`). The backup is checked before anything at `path` is touched; a ledger
    /// already at `path` is kept beside it as `PATH.replaced-<ms since 1970>` (with its WAL, if any),
    /// never deleted. Answers with what the restored ledger holds.
    public static func restore(from backupFile: String, to path: String) throws(VerificationError) -> LedgerDigest {
        guard FileManager.default.fileExists(atPath: backupFile) else {
            throw VerificationError(.storageUnavailable, "storage: no backup file to restore from")
        }
        let backup = try openFile(backupFile, flags: SQLITE_OPEN_READONLY)
        try checkIntegrity(backup)
        let version = try backup.query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations") {
            (row) throws(VerificationError) in try row.requiredInteger(0)
        }.first ?? 0
        let known = LedgerSchema.migrations(.sqlite).count
        guard version >= 1, version <= known else {
            throw VerificationError(.storageUnavailable,
                                    "storage: the backup's schema version \(version) is not one this build reads (1 to \(known))")
        }
        do {
            try FileManager.default.createDirectory(at: URL(fileURLWithPath: path).deletingLastPathComponent(),
                                                    withIntermediateDirectories: true)
        } catch {
            throw VerificationError(.storageUnavailable, "storage: cannot create the ledger's directory")
        }
        let claim = try SQLiteFileClaim.claim(path).get()
        let digest = try withExtendedLifetime(claim) { () throws(VerificationError) -> LedgerDigest in
            try writeChecked(path, journalMode: "WAL", beforeRename: { () throws(VerificationError) in try setAside(path) }) {
                (into) throws(VerificationError) in try copy(backup, into)
            }
        }
        return digest
    }

    // MARK: Steps

    /// A connection of its own to the file (closed when released), outside `SQLiteDatabase`: a
    /// backup must not migrate or reconfigure what it reads.
    private static func openFile(_ path: String, flags: Int32) throws(VerificationError) -> SQLiteConnection {
        var handle: OpaquePointer?
        let code = sqlite3_open_v2(path, &handle, flags | SQLITE_OPEN_NOMUTEX, nil)
        guard code == SQLITE_OK, let handle else {
            if let handle { sqlite3_close_v2(handle) }
            throw SQLiteConnection.storageError("open", code)
        }
        sqlite3_extended_result_codes(handle, 1)
        // A checkpoint or WAL recovery by the gateway makes a reader wait a moment, not fail.
        sqlite3_busy_timeout(handle, 10_000)
        return SQLiteConnection(handle: handle)
    }

    /// Every page of `from` into `into`, in one step (one read snapshot of `from`).
    private static func copy(_ from: SQLiteConnection, _ into: SQLiteConnection) throws(VerificationError) {
        guard let backup = sqlite3_backup_init(into.handle, "main", from.handle, "main") else {
            throw SQLiteConnection.storageError("backup", sqlite3_errcode(into.handle))
        }
        var code = sqlite3_backup_step(backup, -1)
        // BUSY/LOCKED: the source's lock was not granted within its busy timeout; try a few more times.
        var attempts = 0
        while code == SQLITE_BUSY || code == SQLITE_LOCKED, attempts < 5 {
            attempts += 1
            usleep(200_000)
            code = sqlite3_backup_step(backup, -1)
        }
        let finished = sqlite3_backup_finish(backup)
        guard code == SQLITE_DONE else { throw SQLiteConnection.storageError("backup", code) }
        guard finished == SQLITE_OK else { throw SQLiteConnection.storageError("backup", finished) }
    }

    private static func checkIntegrity(_ connection: SQLiteConnection) throws(VerificationError) {
        let answer = try connection.query("PRAGMA integrity_check") { (row) throws(VerificationError) in try row.requiredText(0) }
        guard answer == ["ok"] else {
            throw VerificationError(.storageUnavailable, "storage: the SQLite file fails its integrity check")
        }
    }

    /// Writes a database through `fill` into `destination.partial` (a fresh 0600 file), checks it,
    /// sets its journal mode (a backup: DELETE, one self-contained file; a restored ledger: WAL, the
    /// gateway's, so every connection to it is seen by `SQLiteFileClaim`), closes and syncs it, runs
    /// `beforeRename`, renames it to `destination` and syncs the directory. Answers with its digest.
    private static func writeChecked(_ destination: String, journalMode: String,
                                     beforeRename: () throws(VerificationError) -> Void = {},
                                     fill: (SQLiteConnection) throws(VerificationError) -> Void) throws(VerificationError)
        -> LedgerDigest {
        let partial = destination + ".partial"
        for leftover in [partial, partial + "-journal", partial + "-wal", partial + "-shm"] {
            try? FileManager.default.removeItem(atPath: leftover)
        }
        let created = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard created >= 0 else { throw VerificationError(.storageUnavailable, "storage: cannot create the copy") }
        close(created)
        var renamed = false
        defer { if !renamed { try? FileManager.default.removeItem(atPath: partial) } }
        let digest = try { () throws(VerificationError) -> LedgerDigest in
            let copy = try openFile(partial, flags: SQLITE_OPEN_READWRITE)
            try fill(copy)
            try copy.executeScript("PRAGMA journal_mode=\(journalMode)", operation: "configure the copy")
            try checkIntegrity(copy)
            // A ledger the gateway has not migrated yet (a backup from an older build) is copied as it is.
            return try LedgerDigest.of(try LedgerDigest.shapes(on: copy, upToDate: false), on: copy)
        }()
        try sync(partial)
        try beforeRename()
        guard rename(partial, destination) == 0 else {
            throw VerificationError(.storageUnavailable, "storage: cannot move the copy into place")
        }
        renamed = true
        try sync(URL(fileURLWithPath: destination).deletingLastPathComponent().path)
        return digest
    }

    /// Moves a ledger at `path` (and its WAL) aside; its shared-memory index is rebuilt by SQLite.
    private static func setAside(_ path: String) throws(VerificationError) {
        guard FileManager.default.fileExists(atPath: path) else { return }
        let aside = path + ".replaced-\(Int64(Date().timeIntervalSince1970 * 1000))"
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: path + suffix) {
            guard rename(path + suffix, aside + suffix) == 0 else {
                throw VerificationError(.storageUnavailable, "storage: cannot move the replaced ledger aside")
            }
        }
        try? FileManager.default.removeItem(atPath: path + "-shm")
    }

    private static func sync(_ path: String) throws(VerificationError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw VerificationError(.storageUnavailable, "storage: cannot sync the copy") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw VerificationError(.storageUnavailable, "storage: cannot sync the copy") }
    }
}
