import Glibc

/// A debug timing log of the ledger's batched writes and WAL checkpoints, for attributing a paced
/// run's latency tail (Benchmarks/tail_attribution.py): off unless `IAPGW_WRITER_TRACE` names a file
/// when the process starts. Off, each write call costs one load of `enabled`; on, one line per batch,
/// commit and checkpoint, stamped in CLOCK_MONOTONIC nanoseconds (the clock `iapgw-dev pace` stamps
/// its t0 with, so the two line up):
///   batch OLDEST_QUEUED TAKEN ANSWERED CALLS       (`BatchedWriter`: a writer's batch, queue to answers)
///   commit BEGIN COMMIT_START COMMIT_END CALLS     (`GroupCommit`: statements, then COMMIT and its sync)
///   checkpoint START END WAL_PAGES COPIED_PAGES    (`WALCheckpointer`: one PASSIVE pass)
enum WriterTrace {
    private static let file: Int32 = {
        guard let path = getenv("IAPGW_WRITER_TRACE") else { return -1 }
        return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
    }()

    static var enabled: Bool { file >= 0 }

    /// CLOCK_MONOTONIC in nanoseconds; 0 while the trace is off (no clock read on the request path).
    static func now() -> Int64 {
        guard enabled else { return 0 }
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// One line (`kind` and its fields); a single O_APPEND write, so lines of two threads never interleave.
    static func record(_ kind: String, _ fields: Int64...) {
        guard enabled else { return }
        let line = ([kind] + fields.map(String.init)).joined(separator: " ") + "\n"
        _ = line.utf8CString.withUnsafeBufferPointer { write(file, $0.baseAddress, $0.count - 1) }
    }
}
