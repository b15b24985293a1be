import Foundation
import IAPCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether an SQLite ledger file is in use, asked of the kernel's locks rather than of a pid file
/// (which a crash leaves behind):
/// - a gateway holds `PATH-instance.lock` (flock) for as long as it serves the file;
/// - every SQLite connection of another process, a gateway with a configured `instanceId` or an
///   `sqlite3` shell included, holds a shared lock on the WAL index's "dead man switch" byte
///   (`PATH-shm`, offset 128: `UNIX_SHM_DMS` of SQLite's unix VFS) while it is open, and a
///   connection inside a transaction a lock on the database file's lock bytes.
///
/// While this object lives it holds the instance lock itself, so no gateway starting meanwhile can
/// take the file as its own instance's.
final class SQLiteFileClaim {
    private let descriptor: Int32

    /// The claim, or why the file is in use (or its lock cannot be opened).
    static func claim(_ path: String) -> Result<SQLiteFileClaim, VerificationError> {
        let fd = open(path + "-instance.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            return .failure(VerificationError(.storageUnavailable, "storage: cannot open the ledger's instance lock"))
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            return .failure(inUse("a gateway holds its instance lock"))
        }
        let claim = SQLiteFileClaim(descriptor: fd)
        if lockedByAnotherProcess(path + "-shm", start: 128, length: 1) {
            return .failure(inUse("another process has it open"))
        }
        // SQLite's PENDING, RESERVED and SHARED bytes (at 1 GiB: outside any page's data).
        if lockedByAnotherProcess(path, start: 0x4000_0000, length: 512 + 2) {
            return .failure(inUse("another process is reading or writing it"))
        }
        return .success(claim)
    }

    private init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { close(descriptor) }

    private static func inUse(_ why: String) -> VerificationError {
        VerificationError(.storageUnavailable, "storage: the SQLite ledger is in use (\(why)): stop the gateway first")
    }

    /// True when another process holds a lock that would conflict with a write lock on the range.
    /// F_GETLK only asks; it takes nothing. A missing file is locked by nobody.
    private static func lockedByAnotherProcess(_ path: String, start: Int, length: Int) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = off_t(start)
        lock.l_len = off_t(length)
        guard fcntl(fd, F_GETLK, &lock) == 0 else { return true }
        return lock.l_type != Int16(F_UNLCK)
    }
}
