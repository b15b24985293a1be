import AppStoreSimulator
import CommandLineSupport
import Demo
import Foundation
import Gateway
import IAPConfig
import IAPCore
import Ledger
import Synchronization
import UpstreamHTTP

/// `iapgw-dev bench-notifications`: App Store Server Notifications V2 accepted per second over
/// loopback HTTP (outer + inner JWS verified, durable ledger insert, then 200), and the inbox drain
/// rate (state machine + entitlement + outbox, each entry atomic, 16 per commit), beside the single-core
/// `openssl speed ecdsap256` verify rate measured in the same run.
struct BenchNotificationsCommand: Subcommand {
    let name = "bench-notifications"
    let summary = "benchmark: notifications accepted/s and inbox drain/s (with openssl speed ecdsap256)"
    let usage = """
        usage: iapgw-dev bench-notifications [--count N] [--connections C] [--seconds S] [--storage URL]
                                             [--gateway IAPGW [--gateway-storage URL]] [--json FILE]
          --count        notifications, signed in advance by the simulator (default 5000)
          --connections  concurrent HTTP connections posting them (default 16)
          --seconds      for openssl speed (default 3)
          --storage      the ledger measured: an empty database, sqlite:PATH or postgres://…
                         (default: a fresh SQLite file in a temporary directory)
          --gateway      then post the same notifications again to this `iapgw` binary (`iapgw serve`, its
                         inbox worker running as deployed) in a process of its own, on another empty
                         database: its peak RSS and CPU under that load, apart from the simulator and the
                         client here (which hold every signed notification)
          --gateway-storage  that database (default: a fresh SQLite file in the temporary directory)
          --json         also write the figures as a JSON object to FILE
        """

    func run(_ args: inout CommandLineArguments) async throws -> Int32 {
        let count = try args.positiveCount("--count", default: 5000)
        let connections = try args.positiveCount("--connections", default: 16)
        let seconds = try args.positiveCount("--seconds", default: 3)
        let storage = try args.value("--storage")
        let gatewayBinary = try args.value("--gateway")
        let gatewayStorage = try args.value("--gateway-storage")
        let jsonPath = try args.value("--json")
        try args.finish()
        let mappings = URL(fileURLWithPath: "Mappings", isDirectory: true)
        // Measured first, before the gateway under test starts: waiting for the subprocess holds a thread.
        let openssl = try BenchCommand.opensslSpeedVerify(seconds: Double(seconds))
        return try await Self.bench(count: count, connections: connections, openssl: openssl, mappings: mappings,
                                    storage: storage, gatewayBinary: gatewayBinary, gatewayStorage: gatewayStorage,
                                    jsonPath: jsonPath)
    }

    static func bench(count: Int, connections: Int, openssl: Double, mappings: URL, storage: String?, gatewayBinary: String?,
                      gatewayStorage: String?, jsonPath: String?) async throws -> Int32 {
        let fm = FileManager.default
        let directory = fm.temporaryDirectory.appendingPathComponent("iapgw-bench-notif-\(UUID().uuidString)", isDirectory: true)
        defer { try? fm.removeItem(at: directory) }
        // The harness gives the simulator and the config files; the gateway measured is a second
        // one on its own database, with no background worker, so acceptance and drain are apart.
        let harness = try await DemoHarness.start(directory: directory)
        let storageURL = storage ?? "sqlite:" + directory.appendingPathComponent("bench.sqlite").path
        let backend = if case .postgres = LedgerStorage(storageURL) { "PostgreSQL" } else { "SQLite" }
        let gatewayXML = directory.appendingPathComponent("gateway.xml")
        func useStorage(_ url: String, insteadOf old: String) throws {
            func escaped(_ url: String) -> String { url.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;") }
            let xml = try String(contentsOf: gatewayXML, encoding: .utf8)
            guard xml.contains(escaped(old)) else { throw UsageError(message: "gateway.xml does not name \(old)") }
            try xml.replacingOccurrences(of: escaped(old), with: escaped(url)).write(to: gatewayXML, atomically: true, encoding: .utf8)
        }
        try useStorage(storageURL, insteadOf: "sqlite:" + directory.appendingPathComponent("iapgw.sqlite").path)
        let configuration = try ConfigLoader.loadAll(configDirectory: directory, adapters: GatewayAssembly.catalog())
        let assembly = GatewayAssembly(configuration: configuration, mappingsDirectory: mappings, logger: .disabled)
        let service = try assembly.makeService()
        let server = try assembly.makeServer(service: service)
        try server.start()

        print("signing \(count) DID_RENEW notifications over \(chains(count)) subscriptions (outer + transaction + renewal JWS each)...")
        let bodies = try await signedNotifications(count, type: "DID_RENEW", harness: harness)

        let path = "/v1/notifications/\(harness.bundleId)"
        let client = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(
            connectTimeout: .seconds(5), requestTimeout: .seconds(30), maxConnectionsPerHost: connections))
        print("posting the notifications...")
        fflush(nil)
        let start = DispatchTime.now().uptimeNanoseconds
        let cpuStart = processCPUSeconds()
        let accepted = try await post(bodies, to: "http://127.0.0.1:\(server.port)\(path)", client: client, connections: connections)
        let acceptSeconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        let acceptCPUSeconds = processCPUSeconds() - cpuStart

        // A benchmark drains batches of 500 as fast as it can: no request waits on it, so no 5 s deadline.
        let ledger = try AsyncSQLLedger(storage: storageURL, deadline: .seconds(120),
                                        webhookAudience: GatewayAssembly.webhookAudience(configuration.apps))
        let processor = NotificationProcessor(apps: configuration.apps, ledger: ledger, logger: .disabled,
                                              now: { Int64(Date().timeIntervalSince1970 * 1000) })
        // Marks for a profiler watching the output (the database server's CPU in each phase).
        print("draining the inbox...")
        fflush(nil)
        let drainStart = DispatchTime.now().uptimeNanoseconds
        let drainCPUStart = processCPUSeconds()
        var drained = 0
        while true {
            let report = try await processor.drain(limit: 500)
            drained += report.processed
            if report.processed == 0 { break }
        }
        let drainSeconds = Double(DispatchTime.now().uptimeNanoseconds - drainStart) / 1e9
        let drainCPUSeconds = processCPUSeconds() - drainCPUStart
        let depth = try await ledger.inboxDepth()
        await server.shutdown(gracePeriod: .seconds(2))

        var alone: (accepted: Int, cpuSeconds: Double, peakRSSMegabytes: Double)?
        if let gatewayBinary {
            try useStorage(gatewayStorage ?? "sqlite:" + directory.appendingPathComponent("gateway-alone.sqlite").path, insteadOf: storageURL)
            print("posting them again to \(gatewayBinary) serve, a process of its own on another empty database...")
            fflush(nil)
            let gateway = try await ServeProcess(binary: gatewayBinary, configDirectory: directory, mappings: mappings)
            gateway.resetPeakRSS()
            let cpu = gateway.cpuSeconds()
            let posted = try await post(bodies, to: "http://127.0.0.1:\(gateway.port)\(path)", client: client, connections: connections)
            alone = (posted, gateway.cpuSeconds() - cpu, gateway.peakRSSMegabytes())
            await gateway.stop()
        }
        await harness.stop()

        let acceptedPerSecond = Double(accepted) / acceptSeconds
        let drainedPerSecond = Double(drained) / drainSeconds
        print("")
        print("ledger: \(backend)")
        print("accepted over HTTP (\(connections) connections): \(accepted)/\(count) with 200 in \(String(format: "%.2f", acceptSeconds)) s")
        print("  notifications accepted/s (3 JWS verified + durable \(backend) insert): \(BenchCommand.format(acceptedPerSecond))")
        // The client posting is this process too (libcurl), so this bounds the gateway's own CPU from above.
        print("  CPU per accepted notification (gateway + in-process HTTP client, user + system): "
              + String(format: "%.0f µs", 1e6 * acceptCPUSeconds / Double(max(accepted, 1))))
        print("  inbox drain/s (state machine + entitlement + outbox, each entry atomic, 16 per commit): \(BenchCommand.format(drainedPerSecond))"
              + "  [\(drained) processed, \(depth.pending) left, \(depth.parked) parked]")
        print("  gateway CPU per drained entry (user + system; the database server's is not counted): "
              + String(format: "%.0f µs", 1e6 * drainCPUSeconds / Double(max(drained, 1))))
        if let alone {
            print("  the gateway alone (iapgw serve, its inbox worker running), the same notifications on another database: "
                  + "\(alone.accepted)/\(count) with 200, "
                  + String(format: "%.0f µs of its CPU per notification, peak RSS %.1f MB", 1e6 * alone.cpuSeconds / Double(max(alone.accepted, 1)),
                           alone.peakRSSMegabytes))
        }
        print("  openssl speed ecdsap256 verify (one core, same run): \(BenchCommand.format(openssl))")
        print("  accepted/s as a share of one core's raw verify rate: \(String(format: "%.1f%%", 100 * acceptedPerSecond / openssl))"
              + " (each notification costs at least 3 verifies)")
        if let jsonPath {
            var figures: [String: JSONValue] = [
                "backend": .string(backend), "count": .int(Int64(count)), "connections": .int(Int64(connections)),
                "accepted": .int(Int64(accepted)), "accepted_per_s": .double(acceptedPerSecond),
                "accept_cpu_us_per_notification": .double(1e6 * acceptCPUSeconds / Double(max(accepted, 1))),
                "drained": .int(Int64(drained)), "drained_per_s": .double(drainedPerSecond),
                "drain_cpu_us_per_entry": .double(1e6 * drainCPUSeconds / Double(max(drained, 1))),
                "openssl_speed_ecdsap256_verify_per_s": .double(openssl),
            ]
            if let alone {
                // Only a run in which it accepted every notification measured it under the whole load.
                figures["gateway_alone"] = .object([
                    "accepted": .int(Int64(alone.accepted)),
                    "cpu_us_per_notification": .double(1e6 * alone.cpuSeconds / Double(max(alone.accepted, 1))),
                    "peak_rss_mb": alone.accepted == count ? .double(alone.peakRSSMegabytes) : .null,
                ])
            }
            try Data((JSONValue.object(figures).jsonText + "\n").utf8).write(to: URL(fileURLWithPath: jsonPath))
        }
        return accepted == count && drained == count && (alone.map { $0.accepted == count } ?? true) ? 0 : 1
    }

    /// Subscriptions a run of `count` notifications is about: 25 notifications each, 1 to 200.
    static func chains(_ count: Int) -> Int { max(1, min(200, count / 25)) }

    /// `count` notification bodies of `type`, signed by the harness's simulator, about
    /// `chains(count)` subscriptions in turn.
    static func signedNotifications(_ count: Int, type: String, harness: DemoHarness) async throws -> [[UInt8]] {
        var purchases: [SimulatedPurchase] = []
        for i in 0..<chains(count) {
            purchases.append(try harness.simulator.purchase(PurchaseRequest(
                bundleId: harness.bundleId, productId: "com.example.demo.pro.monthly", type: .autoRenewable,
                owner: "bench-\(i)", subscriptionGroupIdentifier: "demo.pro", price: 4_990)))
        }
        var bodies: [[UInt8]] = []
        bodies.reserveCapacity(count)
        for i in 0..<count {
            let jws = try await harness.simulator.sendNotification(type: type, purchase: purchases[i % purchases.count], to: nil)
            bodies.append(Array(JSONValue.object(["signedPayload": .string(jws)]).jsonText.utf8))
        }
        return bodies
    }

    /// POSTs every body over `connections` concurrent connections; how many were answered 200.
    static func post(_ bodies: [[UInt8]], to url: String, client: UpstreamHTTPClient, connections: Int) async throws -> Int {
        let next = TicketCounter()
        return try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<connections {
                group.addTask {
                    var ok = 0
                    while true {
                        let i = next.take()
                        guard i < bodies.count else { return ok }
                        let response = try await client.send(UpstreamRequest(
                            method: "POST", url: url, headers: [("Content-Type", "application/json")], body: bodies[i]))
                        if response.status == 200 { ok += 1 }
                    }
                }
            }
            return try await group.reduce(0, +)
        }
    }
}

/// User + system CPU time this process has used so far, all threads.
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Hands out 0, 1, 2, … to the posting tasks.
final class TicketCounter: Sendable {
    private let value = Atomic<Int>(0)
    func take() -> Int { value.add(1, ordering: .relaxed).oldValue }
}

extension CommandLineArguments {
    /// A benchmark's size option (a count, connections, seconds): 1 to 1,000,000, else `fallback`.
    mutating func positiveCount(_ name: String, default fallback: Int) throws(UsageError) -> Int {
        guard let text = try value(name) else { return fallback }
        guard let v = Int(text), v > 0, v <= 1_000_000 else { throw UsageError(message: "\(name) must be a positive integer") }
        return v
    }
}
