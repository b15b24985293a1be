import AppleTrust
import Demo
import Foundation
import IAPCore
import TestPKI
import TestSupport
import UpstreamHTTP
import XCTest

/// The shipped alerting rules (Config/prometheus/iapgw-rules.yml) and Grafana dashboard against
/// Debian's own Prometheus tools: `promtool` checks and unit-tests the rules, and a real
/// `prometheus` on loopback scrapes a gateway and fires the storage alert on a planted fault.
/// Without the tools the tests skip, saying so (.ci/run installs the `prometheus` package).
final class PrometheusAlertTests: XCTestCase {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let rulesFile = repository.appendingPathComponent("Config/prometheus/iapgw-rules.yml")
    static let rulesTestFile = repository.appendingPathComponent("Config/prometheus/iapgw-rules.test.yml")
    static let dashboardFile = repository.appendingPathComponent("Config/grafana/iapgw-dashboard.json")

    static func tool(_ name: String) throws -> String {
        for directory in ["/usr/bin", "/usr/local/bin", "/bin"] where FileManager.default.isExecutableFile(atPath: "\(directory)/\(name)") {
            return "\(directory)/\(name)"
        }
        throw XCTSkip("\(name) is not installed (Debian: apt-get install prometheus; .ci/run installs it)")
    }

    func testPromtoolChecksTheRulesAndEveryAlertFiresAndStaysQuietInItsTests() throws {
        let promtool = try Self.tool("promtool")
        let check = try ProcessRun.run(promtool, ["check", "rules", Self.rulesFile.path])
        XCTAssertEqual(check.status, 0, check.stdout + check.stderr)
        let run = try ProcessRun.run(promtool, ["test", "rules", Self.rulesTestFile.path])
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        XCTAssertTrue(run.stdout.contains("SUCCESS"), run.stdout)

        // Each alert has a case that fires it (alerts expected) and one where it is quiet (none).
        let alerts = try Self.alertNames()
        XCTAssertEqual(alerts.count, 12)
        let (firing, quiet) = try Self.testedAlerts()
        XCTAssertEqual(Set(alerts).subtracting(firing), [], "alerts without a firing test")
        XCTAssertEqual(Set(alerts).subtracting(quiet), [], "alerts without a quiet test")
    }

    /// Every `iapgw_` series the rules and the dashboard read is one the gateway exports (its
    /// HELP line on /metrics of a gateway serving TLS), and the expiry gauges carry the real dates.
    func testTheRulesAndTheDashboardReadSeriesTheGatewayExports() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapgw-prom-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let tls = try TestTLSFiles.make(in: directory)
        let gw = try await GatewayE2E.start(self) { $0.tlsFiles = (tls.certificateFile, tls.privateKeyFile) }
        let metrics = try ProcessRun.curl(["--cacert", tls.caFile, "\(gw.harness.gatewayURL)/metrics"])
        XCTAssertEqual(metrics.status, 200, metrics.stderr)
        let exported = Set(metrics.body.split(separator: "\n").compactMap { line -> String? in
            line.hasPrefix("# HELP ") ? line.split(separator: " ")[2].description : nil
        })
        let dashboard = try String(contentsOf: Self.dashboardFile, encoding: .utf8)
        XCTAssertNoThrow(try StrictJSON().parse(Array(dashboard.utf8)), "the dashboard is JSON")
        let rules = try String(contentsOf: Self.rulesFile, encoding: .utf8)
        for (name, text) in [("rules", rules), ("dashboard", dashboard)] {
            let used = Self.seriesNames(in: text)
            XCTAssertFalse(used.isEmpty, name)
            XCTAssertEqual(used.subtracting(exported), [], "\(name) reads series /metrics does not export")
        }
        XCTAssertTrue(Self.seriesNames(in: dashboard).isSuperset(of: Self.seriesNames(in: rules)),
                      "the dashboard shows every series an alert watches")

        // The dates are the files' own: the TLS chain's and the trust root's notAfter.
        let pem = try String(contentsOfFile: tls.certificateFile, encoding: .utf8)
        let tlsNotAfter = try ExpiryGaugesFixture.notAfter(pem: pem)
        XCTAssertTrue(metrics.body.contains("iapgw_tls_certificate_expiry_timestamp_seconds \(tlsNotAfter)\n"), metrics.body)
        let root = try X509Certificate(der: try Data(contentsOf: gw.harness.directory.appendingPathComponent("trust/simulator-root.cer")))
        XCTAssertTrue(metrics.body.contains(
            "iapgw_trust_root_expiry_timestamp_seconds{app=\"\(gw.bundleId)\",purpose=\"jws\"} \(root.notAfter)\n"), metrics.body)
        XCTAssertTrue(metrics.body.contains("iapgw_storage_up 1\n"))
        XCTAssertTrue(metrics.body.contains("iapgw_ready 1\n"))
        XCTAssertFalse(metrics.body.contains(gw.harness.directory.path), "no file path in /metrics")
    }

    /// A real Prometheus (throwaway data dir, loopback) scrapes the gateway every second: queries
    /// of real series answer with what the gateway did (a claim over HTTP counted on its route).
    func testARealPrometheusScrapesTheGatewayAndAnswersQueriesOfItsSeries() async throws {
        let (gw, prometheus) = try await scrapedGateway { _ in }
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-alice")
        let claimed = try await gw.verifyTransactionId(purchase.transactionId, account: "alice")
        XCTAssertEqual(claimed.status, 200, claimed.text)
        try await prometheus.eventually("the claim is counted") {
            try await prometheus.query("sum(iapgw_http_requests_total{job=\"iapgw\",route=\"verify\",status=\"200\"})")
                .first?.value == "1"
        }
        let up = try await prometheus.query("up{job=\"iapgw\"}")
        XCTAssertEqual(up.map(\.value), ["1"])
        let outbox = try await prometheus.query("iapgw_outbox_depth")
        XCTAssertEqual(outbox.first?.labels["job"], .string("iapgw"))
        let storage = try await prometheus.query("iapgw_storage_up")
        XCTAssertEqual(storage.first?.value, "1")
        let firing = try await prometheus.query("ALERTS{alertname=~\"IAPGWStorageUnavailable|IAPGWNotReady\"}")
        XCTAssertEqual(firing.count, 0, "quiet while storage answers")
    }

    /// The same, on PostgreSQL, with the database made read-only (`default_transaction_read_only`,
    /// its sessions ended): a claim is refused and the storage alert fires (the rules' copy has
    /// every `for:` at 1 s); writable again, the gateway reports storage up.
    func testAReadOnlyDatabaseFiresTheStorageAlertInARealPrometheus() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapgw-prom-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        _ = try Self.tool("prometheus")
        let postgres = try TestStorage.fresh(in: directory, for: self, requirePostgres: true)
        let (gw, prometheus) = try await scrapedGateway { $0.storageURL = postgres.storageURL }
        try await prometheus.eventually("the storage gauge is scraped") {
            try await prometheus.query("iapgw_storage_up").first?.value == "1"
        }
        let firingStorage = "ALERTS{alertname=\"IAPGWStorageUnavailable\",alertstate=\"firing\"}"
        let quiet = try await prometheus.query(firingStorage)
        XCTAssertEqual(quiet.count, 0, "quiet while storage answers")

        try postgres.administer("ALTER DATABASE {db} SET default_transaction_read_only = on")
        try postgres.administer("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}' AND pid <> pg_backend_pid()")
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-alice")
        let refused = try await gw.verifyTransactionId(purchase.transactionId, account: "alice")
        XCTAssertEqual(refused.status, 503, refused.text)
        XCTAssertEqual(refused.errorCode, "STORAGE_UNAVAILABLE")
        try await prometheus.eventually("the storage alert fires") {
            try await prometheus.query(firingStorage).count == 1
        }
        let down = try await prometheus.query("iapgw_storage_up")
        XCTAssertEqual(down.first?.value, "0")

        try postgres.administer("ALTER DATABASE {db} RESET default_transaction_read_only")
        try postgres.administer("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}' AND pid <> pg_backend_pid()")
        try await prometheus.eventually("storage is reported up again") {
            try await prometheus.query("iapgw_storage_up").first?.value == "1"
        }
    }

    /// A gateway (the demo's, `iapgw-dev demo`'s harness) and a Prometheus scraping it with a copy
    /// of the shipped rules, both stopped when the test ends.
    private func scrapedGateway(_ configure: (inout DemoHarness.Options) -> Void) async throws -> (GatewayE2E, RunningPrometheus) {
        let binary = try Self.tool("prometheus")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapgw-prom-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let gw = try await GatewayE2E.start(self, configure: configure)
        let prometheus = try RunningPrometheus(binary: binary, directory: directory, client: gw.client,
                                               target: "127.0.0.1:\(gw.harness.server.port)", rules: try Self.testCopyOfRules())
        addTeardownBlock { prometheus.stop() }
        return (gw, prometheus)
    }

    // MARK: Reading the files

    static func alertNames() throws -> [String] {
        try String(contentsOf: rulesFile, encoding: .utf8).split(separator: "\n").compactMap { line in
            let text = line.trimmingCharacters(in: .whitespaces)
            return text.hasPrefix("- alert: ") ? String(text.dropFirst("- alert: ".count)) : nil
        }
    }

    /// The alerts some case of the rules test expects to fire, and those some case expects quiet.
    static func testedAlerts() throws -> (firing: Set<String>, quiet: Set<String>) {
        let lines = try String(contentsOf: rulesTestFile, encoding: .utf8).split(separator: "\n")
            .map { $0.trimmingCharacters(in: .whitespaces) }
        var firing: Set<String> = [], quiet: Set<String> = []
        for (index, line) in lines.enumerated() where line.hasPrefix("alertname: ") && index + 1 < lines.count {
            let name = String(line.dropFirst("alertname: ".count))
            if lines[index + 1] == "exp_alerts: []" {
                quiet.insert(name)
            } else if lines[index + 1] == "exp_alerts:", index + 2 < lines.count, lines[index + 2].hasPrefix("- exp_labels:") {
                firing.insert(name)
            }
        }
        return (firing, quiet)
    }

    static func seriesNames(in text: String) -> Set<String> {
        let pattern = try! NSRegularExpression(pattern: "iapgw_[a-z_]+")
        let names = pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
            Range($0.range, in: text).map { String(text[$0]) }
        }
        // A histogram's series are read by their _bucket/_count/_sum names; its HELP line has the base name.
        return Set(names.map { name in
            for suffix in ["_bucket", "_count", "_sum"] where name.hasSuffix(suffix) && name.contains("_duration_") {
                return String(name.dropLast(suffix.count))
            }
            return name
        })
    }

    /// The shipped rules with every `for:` at 1 s: the same expressions, firing within the test's patience.
    static func testCopyOfRules() throws -> String {
        try String(contentsOf: rulesFile, encoding: .utf8)
            .replacingOccurrences(of: #"(?m)^(\s+)for: .*$"#, with: "$1for: 1s", options: .regularExpression)
    }
}

private enum ExpiryGaugesFixture {
    /// The first certificate's notAfter of a PEM file, in seconds since 1970.
    static func notAfter(pem: String) throws -> Int64 {
        let body = pem.components(separatedBy: "-----BEGIN CERTIFICATE-----")[1].components(separatedBy: "-----END CERTIFICATE-----")[0]
        let der = try XCTUnwrap(Data(base64Encoded: body.replacingOccurrences(of: "\n", with: "")))
        return try X509Certificate(der: der).notAfter
    }
}

/// `prometheus` on a free loopback port with a throwaway data directory, scraping one target every
/// second and evaluating `rules` every second; stopped (SIGTERM, then waited for) by `stop`.
private final class RunningPrometheus: @unchecked Sendable {
    private let process = Process()
    let url: String
    private let client: UpstreamHTTPClient

    init(binary: String, directory: URL, client: UpstreamHTTPClient, target: String, rules: String) throws {
        let rulesFile = directory.appendingPathComponent("rules.yml")
        try rules.write(to: rulesFile, atomically: true, encoding: .utf8)
        let config = directory.appendingPathComponent("prometheus.yml")
        try """
            global:
              scrape_interval: 1s
              evaluation_interval: 1s
            rule_files:
              - \(rulesFile.path)
            scrape_configs:
              - job_name: iapgw
                static_configs:
                  - targets: ["\(target)"]
            """.write(to: config, atomically: true, encoding: .utf8)
        let port = try Self.freeLoopbackPort()
        url = "http://127.0.0.1:\(port)"
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["--config.file=\(config.path)", "--storage.tsdb.path=\(directory.appendingPathComponent("data").path)",
                             "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        self.client = client
        try process.run()
    }

    /// A port nothing listens on now (the kernel's pick for a socket bound and closed at once).
    private static func freeLoopbackPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw GatewayProcessError(message: "socket failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw -> Int32 in
                guard bind(fd, raw, length) == 0 else { return -1 }
                return getsockname(fd, raw, &length)
            }
        }
        guard bound == 0 else { throw GatewayProcessError(message: "bind failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    struct Sample { let labels: [String: JSONValue]; let value: String }

    /// An instant query's samples; none while Prometheus is not up yet.
    func query(_ promQL: String) async throws -> [Sample] {
        var components = URLComponents(string: "\(url)/api/v1/query")!
        components.queryItems = [URLQueryItem(name: "query", value: promQL)]
        guard let answer = try? await client.send(UpstreamRequest(method: "GET", url: components.url!.absoluteString)),
              answer.status == 200 else { return [] }
        let json = try StrictJSON().parse(answer.body)
        return (json["data"]?["result"]?.arrayValue ?? []).map { sample in
            Sample(labels: sample["metric"]?.objectValue ?? [:], value: sample["value"]?.arrayValue?.last?.stringValue ?? "")
        }
    }

    /// Polls `condition` every 250 ms for up to 60 s.
    func eventually(_ what: String, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(250))
        }
        XCTFail("\(what): not within 60 s")
    }
}
