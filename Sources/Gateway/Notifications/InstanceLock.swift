#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An exclusive lock on a file, held while this object lives (and released by the kernel when the
/// process dies, SIGKILL included): proof that no other live process holds it. On SQLite it makes
/// "the instance of this database file" an identity that survives a restart and that no live
/// instance can share, so the webhook leases held under it at start are a dead incarnation's.
final class InstanceLock: Sendable {
    private let descriptor: Int32

    /// Nil when another live process holds the lock (or the file cannot be opened).
    init?(path: String) {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            return nil
        }
        descriptor = fd
    }

    deinit { close(descriptor) }
}
