import Foundation
import Glibc

/// The one owner of a log output (standard error): callers queue lines and never wait for the
/// output; a thread of its own writes them, whole and in the order queued.
///
/// A write to standard error blocks when whoever reads it stops (a full pipe to a stuck log
/// shipper). Written on the caller's thread, as lines were, that stalled libmicrohttpd's threads
/// and every request with them. The queue is bounded (`capacityBytes`): when it is full, new lines
/// are dropped until the thread has taken what is queued; a `log_lines_dropped` warning line then
/// marks the gap in the output, and `droppedLines` (`iapgw_log_lines_dropped_total` in `/metrics`)
/// counts them. At exit, `flush(within:)` writes what is queued, for at most its deadline.
public final class LogWriter: @unchecked Sendable {
    /// Standard error's writer: every logger of the process writing there shares it.
    public static let standardError = LogWriter(fileDescriptor: STDERR_FILENO)
    /// Queued lines beyond which new ones are dropped (about 3,000 lines of 300 bytes).
    public static let defaultCapacityBytes = 1 << 20
    /// How long the thread lets lines gather after the first before writing them: one write and
    /// one wake-up per batch rather than per line (`POST /verify` logs a line per request).
    static let gatherDelay: Duration = .milliseconds(5)

    public let capacityBytes: Int
    private let fileDescriptor: Int32
    /// One write(2) to the output: bytes taken, or -1 with `errno` set (tests give one that fails midway).
    private let output: @Sendable (Int32, UnsafeRawPointer, Int) -> Int
    /// Guards everything below; the writing thread waits on it, and so does `flush`.
    private let condition = NSCondition()
    /// Whole lines, each ending in a newline, not yet taken by the thread.
    private var queued: [UInt8] = []
    /// Set by the first line dropped, cleared when the thread takes the queue: lines are dropped
    /// from then on, so the gap is one place in the output, where its marker line goes.
    private var dropping = false
    private var droppedInGap = 0
    private var dropped = 0
    /// The thread holds a batch it has not finished writing.
    private var writing = false
    private var threadWaiting = false

    /// A writer to `fileDescriptor` (not closed by the writer), with its thread started.
    public convenience init(fileDescriptor: Int32, capacityBytes: Int = LogWriter.defaultCapacityBytes) {
        self.init(fileDescriptor: fileDescriptor, capacityBytes: capacityBytes) { Glibc.write($0, $1, $2) }
    }

    init(fileDescriptor: Int32, capacityBytes: Int, output: @escaping @Sendable (Int32, UnsafeRawPointer, Int) -> Int) {
        self.fileDescriptor = fileDescriptor
        self.capacityBytes = max(1, capacityBytes)
        self.output = output
        let thread = Thread { [self] in run() }
        thread.name = "iapgw.log"
        thread.start()
    }

    /// Lines dropped so far: the queue was full, or the output failed.
    public var droppedLines: Int {
        condition.lock()
        defer { condition.unlock() }
        return dropped
    }

    /// Queues `line` (a newline is added), or drops it when the queue is full. Never blocks on the output.
    public func write(_ line: String) {
        let size = line.utf8.count + 1
        condition.lock()
        defer { condition.unlock() }
        if !dropping, queued.count + size <= capacityBytes {
            queued.append(contentsOf: line.utf8)
            queued.append(UInt8(ascii: "\n"))
        } else {
            // Dropped whole, even a line alone larger than the queue: a cut line is not JSON.
            dropping = true
            droppedInGap += 1
            dropped += 1
        }
        // The thread is woken for a drop too: only it ends the gap (with its marker line), and an
        // idle thread left asleep would keep every later line dropped.
        if threadWaiting {
            threadWaiting = false
            condition.broadcast()
        }
    }

    /// Waits until what is queued now is written, for at most `limit`; false if it was not (the
    /// output is blocked). For process exit, after the last line.
    @discardableResult
    public func flush(within limit: Duration) -> Bool {
        let end = limit.fromNow
        condition.lock()
        defer { condition.unlock() }
        while !queued.isEmpty || droppedInGap > 0 || writing {
            guard condition.wait(until: end) else { return false }
        }
        return true
    }

    /// The writing thread: takes everything queued, writes it, and again; sleeps when nothing is queued.
    private func run() {
        var batch: [UInt8] = []
        let newline = UInt8(ascii: "\n")
        // A write failed after part of a line: the output ends in a half line (the thread's alone).
        var endsMidLine = false
        condition.lock()
        while true {
            while queued.isEmpty && droppedInGap == 0 {
                threadWaiting = true
                condition.wait()
            }
            condition.unlock()
            Thread.sleep(forTimeInterval: Self.gatherDelay.timeInterval)
            condition.lock()
            swap(&batch, &queued)
            if droppedInGap > 0 {
                batch.append(contentsOf: Self.gapMarker(droppedInGap).utf8)
                batch.append(UInt8(ascii: "\n"))
                droppedInGap = 0
            }
            dropping = false
            writing = true
            condition.unlock()
            // The half line is ended first, so the lines after it stand alone (its loss is counted).
            if endsMidLine { endsMidLine = writeAll([newline]) == 0 }
            let written = endsMidLine ? 0 : writeAll(batch)
            let unwritten = batch[written...].reduce(0) { $0 + ($1 == newline ? 1 : 0) }
            if written > 0, written < batch.count { endsMidLine = batch[written - 1] != newline }
            batch.removeAll(keepingCapacity: true)
            condition.lock()
            dropped += unwritten
            writing = false
            condition.broadcast()
        }
    }

    /// Writes `bytes` whole, across partial writes; the number of bytes written (fewer: the output failed).
    private func writeAll(_ bytes: [UInt8]) -> Int {
        bytes.withUnsafeBytes { raw -> Int in
            guard let base = raw.baseAddress else { return 0 }
            var offset = 0
            while offset < raw.count {
                let n = output(fileDescriptor, base + offset, raw.count - offset)
                if n > 0 {
                    offset += n
                } else if n < 0, errno == EINTR {
                    continue
                } else if n < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                    // A non-blocking output (inherited so): wait until it takes bytes again.
                    var ready = pollfd(fd: fileDescriptor, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&ready, 1, 1_000)
                } else {
                    return offset
                }
            }
            return offset
        }
    }

    /// The line that marks where `count` lines were dropped.
    static func gapMarker(_ count: Int) -> String {
        JSONValue.object([
            "ts": .string(Logger.timestamp()), "level": .string(Logger.Level.warning.rawValue),
            "event": .string("log_lines_dropped"), "count": .string(String(count)),
        ]).jsonText
    }
}
