import CSQLite
import Dispatch
import Foundation

/// Copies the WAL back into the database file from a connection of its own, off the request path.
///
/// SQLite's automatic checkpoint runs inside the commit that crosses the threshold, under the
/// ledger's one writer: that commit then writes up to a thousand pages and syncs the file (tens of
/// milliseconds here), and every request queued behind it waits. A PASSIVE checkpoint on a second
/// connection never blocks the writer, so the stall leaves the latency tail. The automatic one stays
/// as a backstop (at a higher threshold) should this stop keeping up.
final class WALCheckpointer: @unchecked Sendable {
    /// Pages of WAL after which a commit checkpoints by itself anyway (about 40 MB).
    static let backstopPages: Int32 = 10_000

    private let handle: OpaquePointer
    private let timer: DispatchSourceTimer

    /// Nil if the second connection cannot be opened: the automatic checkpoint then does the work.
    init?(path: String, interval: DispatchTimeInterval = .milliseconds(250)) {
        var opened: OpaquePointer?
        guard sqlite3_open_v2(path, &opened, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK,
              let opened else {
            if let opened { sqlite3_close_v2(opened) }
            return nil
        }
        // A connection finds out the file is in WAL mode only when it first reads it.
        guard sqlite3_exec(opened, "SELECT count(*) FROM sqlite_master", nil, nil, nil) == SQLITE_OK else {
            sqlite3_close_v2(opened)
            return nil
        }
        handle = opened
        sqlite3_busy_timeout(opened, 1_000)
        // The timer's serial queue is the only user of `handle`.
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "iapgw.sqlite.checkpoint"))
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.setEventHandler { [handle] in
            // A busy or failed pass is simply tried again at the next tick.
            var walPages: Int32 = 0
            var copiedPages: Int32 = 0
            let start = WriterTrace.now()
            _ = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, &walPages, &copiedPages)
            WriterTrace.record("checkpoint", start, WriterTrace.now(), Int64(walPages), Int64(copiedPages))
        }
        timer.setCancelHandler { [handle] in sqlite3_close_v2(handle) }
        timer.resume()
    }

    deinit { timer.cancel() }
}
