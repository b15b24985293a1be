import CommandLineSupport
import Foundation
import Glibc
import IAPCore

/// `iapgw serve` in a process of its own, for a benchmark to measure its peak RSS and CPU apart
/// from the simulator and the client (which hold every signed body of the run).
final class ServeProcess {
    let port: Int
    private let pid: pid_t

    /// Starts it on `configDirectory` and waits (60 s at most) for its "listening" log line, which
    /// names its port (the configuration asks for any free one).
    init(binary: String, configDirectory: URL, mappings: URL) async throws {
        let log = configDirectory.appendingPathComponent("gateway-process.log").path
        pid = try ChildProcess.start(binary, ["serve", "--config", configDirectory.path, "--mappings", mappings.path], output: log)
        let deadline = Date().addingTimeInterval(60)
        var found: Int?
        while found == nil, Date() < deadline {
            let lines = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n") ?? []
            found = lines.lazy.compactMap { line -> Int? in
                guard let event = try? StrictJSON().parse(Array(line.utf8)), event["event"]?.stringValue == "listening" else { return nil }
                return event["port"]?.stringValue.flatMap { Int($0) }
            }.first
            if found == nil { try? await Task.sleep(for: .milliseconds(50)) }
        }
        guard let found else {
            kill(pid, SIGKILL)
            waitpid(pid, nil, 0)
            throw ChildProcess.Failure(description: "\(binary) serve did not say it was listening within 60 s (its log: \(log))")
        }
        port = found
    }

    /// Starts its peak RSS afresh (VmHWM; writing 5 to clear_refs, Linux >= 4.0).
    func resetPeakRSS() {
        try? "5".write(toFile: "/proc/\(pid)/clear_refs", atomically: false, encoding: .utf8)
    }

    /// Its peak RSS since the last reset, in MB (0 if /proc has none).
    func peakRSSMegabytes() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kB = line.split(separator: " ").dropFirst().first.flatMap({ Double($0) })
        else { return 0 }
        return kB / 1024
    }

    /// Its user + system CPU time so far (/proc/PID/stat fields 14 and 15).
    func cpuSeconds() -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let afterName = stat.range(of: ") ", options: .backwards)
        else { return 0 }
        // From the 3rd field on: the parenthesised command name before it may hold spaces.
        let fields = stat[afterName.upperBound...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// SIGTERM (it finishes what is in flight), SIGKILL after 20 s; reaped either way.
    func stop() async {
        kill(pid, SIGTERM)
        let deadline = Date().addingTimeInterval(20)
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) == 0 {
            if Date() >= deadline {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                return
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }
}
