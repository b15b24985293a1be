import AppStoreSimulator
import CommandLineSupport
import Demo
import Foundation
import Gateway
import HTTPServer
import IAPConfig
import IAPCore
import Ledger
import Synchronization
import UpstreamHTTP

/// `iapgw-dev bench-webhooks`: whether webhook delivery keeps up with notification intake. A burst
/// of notifications is posted as fast as `iapgw serve` (a process of its own, its background work
/// running as deployed) takes them, to an app whose receiver answers each delivery after a fixed
/// latency; the backlog's drain time (burst start to the last event delivered) is printed beside
/// twice the burst's length, with deliveries/s, and then the writer's commits/s once it is idle.
struct BenchWebhooksCommand: Subcommand {
    let name = "bench-webhooks"
    let summary = "benchmark: webhook backlog drain after a notification burst, deliveries/s, idle commits/s"
    let usage = """
        usage: iapgw-dev bench-webhooks --gateway IAPGW [--count N] [--connections C] [--latency-ms L]
                                        [--concurrency K] [--idle-seconds S] [--storage URL] [--json FILE]
          --gateway       the `iapgw` binary run as the gateway (`iapgw serve`)
          --count         notifications in the burst, signed in advance (default 3000)
          --connections   concurrent HTTP connections posting them (default 16)
          --latency-ms    how long the receiver takes to answer each delivery (default 20)
          --concurrency   the gateway's webhooks.concurrency (default: the gateway's default, 8)
          --idle-seconds  how long the idle gateway's writer commits are counted (default 5)
          --storage       the gateway's database: an empty one, sqlite:PATH or postgres://…
                          (default: a fresh SQLite file in a temporary directory)
          --json          also write the figures as a JSON object to FILE
        """

    func run(_ args: inout CommandLineArguments) async throws -> Int32 {
        guard let gateway = try args.value("--gateway") else { throw UsageError(message: "--gateway IAPGW is required") }
        let count = try args.positiveCount("--count", default: 3000)
        let connections = try args.positiveCount("--connections", default: 16)
        let latency = try args.positiveCount("--latency-ms", default: 20)
        let concurrency = try args.value("--concurrency").map { text throws(UsageError) -> Int in
            guard let v = Int(text), (1...256).contains(v) else { throw UsageError(message: "--concurrency must be 1-256") }
            return v
        }
        let idleSeconds = try args.positiveCount("--idle-seconds", default: 5)
        let storage = try args.value("--storage")
        let jsonPath = try args.value("--json")
        try args.finish()
        return try await Self.bench(gateway: gateway, count: count, connections: connections, latencyMillis: latency,
                                    concurrency: concurrency, idleSeconds: idleSeconds, storage: storage, jsonPath: jsonPath)
    }

    static func bench(gateway binary: String, count: Int, connections: Int, latencyMillis: Int, concurrency: Int?,
                      idleSeconds: Int, storage: String?, jsonPath: String?) async throws -> Int32 {
        let fm = FileManager.default
        let directory = fm.temporaryDirectory.appendingPathComponent("iapgw-bench-hooks-\(UUID().uuidString)", isDirectory: true)
        defer { try? fm.removeItem(at: directory) }
        let receiver = LatentReceiver(latency: .milliseconds(latencyMillis))
        let server = try HTTPServer(configuration: HTTPServerConfiguration(port: 0, maxConnections: 1024)) { request in
            await receiver.answer(request)
        }
        try server.start()
        var options = DemoHarness.Options()
        options.webhookURL = "http://127.0.0.1:\(server.port)/hooks"
        // The harness gives the simulator and the config files; the gateway measured is a process of
        // its own on its own database.
        let harness = try await DemoHarness.start(directory: directory, options: options)
        let storageURL = storage ?? "sqlite:" + directory.appendingPathComponent("bench-hooks.sqlite").path
        let gatewayXML = directory.appendingPathComponent("gateway.xml")
        func escaped(_ url: String) -> String { url.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;") }
        var xml = try String(contentsOf: gatewayXML, encoding: .utf8)
        let harnessStorage = escaped("sqlite:" + directory.appendingPathComponent("iapgw.sqlite").path)
        guard xml.contains(harnessStorage), xml.contains("</gateway>") else { throw UsageError(message: "unexpected gateway.xml") }
        xml = xml.replacingOccurrences(of: harnessStorage, with: escaped(storageURL))
        if let concurrency {
            xml = xml.replacingOccurrences(
                of: "</gateway>", with: "<webhooks><concurrency type=\"integer\">\(concurrency)</concurrency></webhooks></gateway>")
        }
        try xml.write(to: gatewayXML, atomically: true, encoding: .utf8)
        let configuration = try ConfigLoader.loadAll(configDirectory: directory, adapters: GatewayAssembly.catalog())
        let effectiveConcurrency = Int(configuration.gateway.webhooks.concurrency)

        let chains = BenchNotificationsCommand.chains(count)
        print("signing \(count) REFUND_DECLINED notifications over \(chains) purchases (one webhook event each)...")
        let bodies = try await BenchNotificationsCommand.signedNotifications(count, type: "REFUND_DECLINED", harness: harness)

        let trace = directory.appendingPathComponent("writer-trace.txt").path
        setenv("IAPGW_WRITER_TRACE", trace, 1)
        let gateway = try await ServeProcess(binary: binary, configDirectory: directory, mappings: URL(fileURLWithPath: "Mappings", isDirectory: true))
        unsetenv("IAPGW_WRITER_TRACE")
        let ledger = try SQLLedger(storage: storageURL, deadline: .seconds(60))
        let client = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(
            connectTimeout: .seconds(5), requestTimeout: .seconds(30), maxConnectionsPerHost: connections))
        let url = "http://127.0.0.1:\(gateway.port)/v1/notifications/\(harness.bundleId)"
        print("posting the burst (\(connections) connections) to \(binary) serve, receiver latency \(latencyMillis) ms, "
              + "webhooks.concurrency \(effectiveConcurrency)...")
        fflush(nil)
        let start = ContinuousClock.now
        let accepted = try await BenchNotificationsCommand.post(bodies, to: url, client: client, connections: connections)
        let burst = ContinuousClock.now - start
        let backlogAtBurstEnd = try ledger.inboxDepth().pending + ledger.outboxDepth()
        // Drained: every notification processed and every event it made delivered (or given up on: a
        // run with any left is reported as not drained).
        var drained: Duration?
        let deadline = start + .seconds(600)
        while ContinuousClock.now < deadline {
            if try ledger.inboxDepth().pending == 0, try ledger.outboxDepth() == 0 {
                drained = ContinuousClock.now - start
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let report = receiver.report
        // Idle: nothing queued, nothing arriving; what the writer still commits is the background
        // work's polling.
        let idleFrom = monotonicNanoseconds()
        try await Task.sleep(for: .seconds(idleSeconds))
        let idleTo = monotonicNanoseconds()
        await gateway.stop()
        await harness.stop()
        await server.shutdown(gracePeriod: .seconds(1))
        let commits = (try? String(contentsOfFile: trace, encoding: .utf8))?.split(separator: "\n").filter { line in
            let fields = line.split(separator: " ")
            guard fields.count >= 4, fields[0] == "commit", let end = Int64(fields[3]) else { return false }
            return end >= idleFrom && end < idleTo
        }.count

        let burstSeconds = burst / .seconds(1)
        let drainSeconds = drained.map { $0 / .seconds(1) }
        let deliveriesPerSecond = report.deliverySpan.map { Double(report.accepted) / max($0, 1e-9) }
        print("")
        print("burst: \(accepted)/\(count) notifications accepted in \(String(format: "%.2f", burstSeconds)) s "
              + "(\(BenchCommand.format(Double(accepted) / burstSeconds))/s, intake with the background work running); "
              + "backlog at its end: \(backlogAtBurstEnd) (inbox + outbox)")
        print("events delivered (2xx) to the receiver: \(report.accepted), attempts \(report.attempts), "
              + "most in flight \(report.mostInFlight), out-of-order deliveries within a chain \(report.outOfOrder)")
        if let drainSeconds {
            print("backlog drained \(String(format: "%.2f", drainSeconds)) s after the burst began: "
                  + "\(String(format: "%.2f", drainSeconds / burstSeconds))x the burst's length (goal <= 2.0x: "
                  + (drainSeconds <= 2 * burstSeconds ? "met" : "NOT met") + ")")
        } else {
            print("backlog NOT drained within 600 s")
        }
        if let deliveriesPerSecond {
            print("deliveries/s at \(latencyMillis) ms receiver latency (first to last delivery): "
                  + "\(BenchCommand.format(deliveriesPerSecond)); the concurrency's ceiling \(effectiveConcurrency) / "
                  + "\(latencyMillis) ms = \(BenchCommand.format(Double(effectiveConcurrency) * 1000 / Double(latencyMillis)))/s")
        }
        if let commits {
            print("writer commits/s while idle (\(idleSeconds) s, IAPGW_WRITER_TRACE): "
                  + String(format: "%.1f", Double(commits) / Double(idleSeconds)))
        }
        if let jsonPath {
            let figures: [String: JSONValue] = [
                "count": .int(Int64(count)), "connections": .int(Int64(connections)), "accepted": .int(Int64(accepted)),
                "latency_ms": .int(Int64(latencyMillis)), "concurrency": .int(Int64(effectiveConcurrency)),
                "burst_s": .double(burstSeconds), "backlog_at_burst_end": .int(Int64(backlogAtBurstEnd)),
                "delivered": .int(Int64(report.accepted)),
                "drain_s": drainSeconds.map(JSONValue.double) ?? .null,
                "drain_to_burst": drainSeconds.map { .double($0 / burstSeconds) } ?? .null,
                "deliveries_per_s": deliveriesPerSecond.map(JSONValue.double) ?? .null,
                "out_of_order": .int(Int64(report.outOfOrder)), "most_in_flight": .int(Int64(report.mostInFlight)),
                "idle_commits_per_s": commits.map { .double(Double($0) / Double(idleSeconds)) } ?? .null,
            ]
            try Data((JSONValue.object(figures).jsonText + "\n").utf8).write(to: URL(fileURLWithPath: jsonPath))
        }
        return accepted == count && drained != nil && report.outOfOrder == 0 && report.accepted >= count ? 0 : 1
    }

    static func monotonicNanoseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}

/// The app backend: answers every delivery 200 after `latency`, counting them, the most in flight
/// at once, and deliveries of a chain that arrive after a later event of it (its `occurredAt`).
private final class LatentReceiver: Sendable {
    struct Report: Sendable {
        var attempts = 0
        var accepted = 0
        var inFlight = 0
        var mostInFlight = 0
        var outOfOrder = 0
        var latestOfChain: [String: Int64] = [:]
        var first: ContinuousClock.Instant?
        var last: ContinuousClock.Instant?
        var deliverySpan: Double? { first.flatMap { f in last.map { ($0 - f) / .seconds(1) } } }
    }

    private let latency: Duration
    private let state = Mutex(Report())

    init(latency: Duration) { self.latency = latency }

    var report: Report { state.withLock { $0 } }

    func answer(_ request: HTTPRequest) async -> HTTPResponse {
        state.withLock { s in
            s.attempts += 1
            s.inFlight += 1
            s.mostInFlight = max(s.mostInFlight, s.inFlight)
        }
        try? await Task.sleep(for: latency)
        let event = try? StrictJSON().parse(request.body)
        return state.withLock { s in
            s.inFlight -= 1
            s.accepted += 1
            let now = ContinuousClock.now
            if s.first == nil { s.first = now }
            s.last = now
            if let chain = event?["originalTransactionId"]?.stringValue, case .int(let at)? = event?["occurredAt"] {
                if let latest = s.latestOfChain[chain], latest > at { s.outOfOrder += 1 }
                s.latestOfChain[chain] = max(s.latestOfChain[chain] ?? at, at)
            }
            return HTTPResponse(status: 200)
        }
    }
}
