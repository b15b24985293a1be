import Foundation
import Glibc

/// A pipe as a stuck log shipper leaves standard error: nobody reads it, and its kernel buffer is
/// as small as Linux allows (one page), so a few lines fill it and the next write blocks.
public final class UnreadPipe: @unchecked Sendable {
    public let writeEnd: Int32
    private let readEnd: Int32

    public init() throws {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw POSIXError(.EMFILE) }
        (readEnd, writeEnd) = (ends[0], ends[1])
        let setPipeSize: Int32 = 1031  // F_SETPIPE_SZ (Linux)
        _ = fcntl(writeEnd, setPipeSize, 4096)
    }

    /// Closes the write end once `writtenOut` says everything meant for the pipe was written (it is
    /// called while the pipe is being read), and returns all that was written, read to the end.
    /// The write end's descriptor then stays open on /dev/null: a writer still holding the number
    /// never writes into whatever file would reuse it.
    public func readAll(after writtenOut: @escaping @Sendable () -> Bool) -> (text: String, writtenOut: Bool) {
        let writeEnd = writeEnd
        let outcome = LockedResult()
        let closer = Thread {
            outcome.set(writtenOut())
            let null = open("/dev/null", O_WRONLY)
            dup2(null, writeEnd)
            close(null)
        }
        closer.start()
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
            if n > 0 {
                bytes += chunk[0..<n]
            } else if n < 0, errno == EINTR {
                continue
            } else {
                break
            }
        }
        close(readEnd)
        return (String(decoding: bytes, as: UTF8.self), outcome.get())
    }

    private final class LockedResult: @unchecked Sendable {
        private let lock = NSLock()
        private var value = false
        func set(_ v: Bool) { lock.withLock { value = v } }
        func get() -> Bool { lock.withLock { value } }
    }
}
