import CommandLineSupport
import Foundation
import Gateway
import Glibc
import HTTPServer
import IAPConfig
import IAPCore

/// The gateway a benchmark loads: in this process, or an `iapgw serve` of its own on the same
/// configuration, so that its peak RSS and CPU are the gateway's alone and not the simulator's
/// and the client's (which hold every signed body of the run) as well.
final class MeasuredGateway {
    let port: Int
    private let server: HTTPServer?
    private let child: pid_t?

    init(binary: String?, configuration: ConfigLoader.Configuration, configDirectory: URL, mappings: URL) throws {
        guard let binary else {
            let assembly = GatewayAssembly(configuration: configuration, mappingsDirectory: mappings, logger: .disabled)
            let server = try assembly.makeServer(service: try assembly.makeService())
            try server.start()
            self.server = server
            child = nil
            port = server.port
            return
        }
        server = nil
        let log = configDirectory.appendingPathComponent("measured-gateway.log").path
        let pid = try ChildProcess.start(binary, ["serve", "--config", configDirectory.path, "--mappings", mappings.path], output: log)
        child = pid
        // Its port (the configuration asks for any free one) is in its "listening" line.
        let deadline = Date().addingTimeInterval(60)
        var found: Int?
        while found == nil, Date() < deadline {
            let lines = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n") ?? []
            found = lines.lazy.compactMap { line -> Int? in
                guard let event = try? StrictJSON().parse(Array(line.utf8)), event["event"]?.stringValue == "listening" else { return nil }
                return event["port"]?.stringValue.flatMap { Int($0) }
            }.first
            if found == nil { usleep(50_000) }
        }
        guard let found else {
            kill(pid, SIGKILL)
            waitpid(pid, nil, 0)
            throw ChildProcess.Failure(description: "\(binary) serve did not say it was listening within 60 s (its log: \(log))")
        }
        port = found
    }

    /// Starts the child's peak RSS afresh (VmHWM; writing 5 to clear_refs, Linux >= 4.0).
    func resetPeakRSS() {
        guard let child else { return }
        try? "5".write(toFile: "/proc/\(child)/clear_refs", atomically: false, encoding: .utf8)
    }

    /// The child's peak RSS since the last reset, in MB; nil in-process (not the gateway's alone).
    func childPeakRSSMegabytes() -> Double? {
        guard let child, let status = try? String(contentsOfFile: "/proc/\(child)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kB = line.split(separator: " ").dropFirst().first.flatMap({ Double($0) })
        else { return nil }
        return kB / 1024
    }

    /// The child's user + system CPU time so far (/proc/PID/stat fields 14 and 15); nil in-process.
    func childCPUSeconds() -> Double? {
        guard let child, let stat = try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8),
            let afterName = stat.range(of: ") ", options: .backwards)
        else { return nil }
        // Fields from the 3rd on, after the parenthesised command name (which may hold spaces).
        let fields = stat[afterName.upperBound...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// SIGTERM (the gateway finishes what is in flight), SIGKILL after 20 s; reaped either way.
    func stop() async {
        if let server { await server.shutdown(gracePeriod: .seconds(2)) }
        guard let child else { return }
        kill(child, SIGTERM)
        let deadline = Date().addingTimeInterval(20)
        var status: Int32 = 0
        while waitpid(child, &status, WNOHANG) == 0 {
            if Date() >= deadline {
                kill(child, SIGKILL)
                waitpid(child, &status, 0)
                return
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }
}
