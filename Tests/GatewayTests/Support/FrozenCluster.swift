import Foundation

/// A PostgreSQL cluster stopped with SIGSTOP, postmaster and every child: connections stay open
/// and nothing is answered (a frozen VM, a stalled disk under the server).
final class FrozenCluster: Sendable {
    private let postmaster: pid_t

    init(dataDirectory: String) throws {
        let pidFile = try String(contentsOfFile: dataDirectory + "/postmaster.pid", encoding: .utf8)
        guard let first = pidFile.split(separator: "\n").first, let pid = pid_t(first) else {
            throw GatewayProcessError(message: "no postmaster pid in \(dataDirectory)/postmaster.pid")
        }
        postmaster = pid
    }

    /// The postmaster's children now (backends, checkpointer, walwriter, ...), from /proc.
    private var children: [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry),
                  let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return nil }
            // "pid (comm) state ppid ...": the fields after the command name.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && pid_t(fields[1]) == postmaster ? pid : nil
        }
    }

    func freeze() {
        // The postmaster first, so it forks no child that would escape.
        kill(postmaster, SIGSTOP)
        for child in children { kill(child, SIGSTOP) }
    }

    func thaw() {
        for child in children { kill(child, SIGCONT) }
        kill(postmaster, SIGCONT)
    }
}
