import Foundation
import XCTest

/// The database of a separately run gateway, named in one place (its gateway.xml `storageURL`) and
/// read back through one helper, so the same test runs on another backend by swapping the URL.
///
/// `IAPGW_TEST_POSTGRES_URL=postgres://user@host:port/db` (Scripts/test.sh sets it when PostgreSQL
/// is installed) makes each test create its own database on that server (named `iapgw_test_<uuid>`,
/// dropped at teardown; the URL's own database is only used to connect); unset, each test gets a
/// fresh SQLite file in its directory, and tests that need a shared server are skipped.
struct TestStorage {
    /// PostgreSQL: the test database's URL, its name, and the server URL it was created through.
    enum Backend { case sqlite(path: String), postgres(url: String, database: String, server: String) }

    let backend: Backend

    /// What goes into gateway.xml's `<storageURL>`.
    var storageURL: String {
        switch backend {
        case .sqlite(let path): "sqlite:" + path
        case .postgres(let url, _, _): url
        }
    }

    /// What a gateway process needs beside its config: instances on PostgreSQL share a receipt seal key.
    var processEnvironment: [String: String] {
        switch backend {
        case .sqlite: [:]
        case .postgres: ["IAPGW_RECEIPT_SEAL_KEY": String(repeating: "5e", count: 32)]
        }
    }

    static func fresh(in directory: URL, for test: XCTestCase, requirePostgres: Bool = false,
                      environment: [String: String] = ProcessInfo.processInfo.environment) throws -> TestStorage {
        guard let server = environment["IAPGW_TEST_POSTGRES_URL"], !server.isEmpty else {
            if requirePostgres {
                throw XCTSkip("IAPGW_TEST_POSTGRES_URL is not set (Scripts/test.sh sets it when PostgreSQL is installed)")
            }
            return TestStorage(backend: .sqlite(path: directory.appendingPathComponent("gateway.sqlite").path))
        }
        guard var components = URLComponents(string: server),
              components.scheme == "postgres" || components.scheme == "postgresql" else {
            throw GatewayProcessError(message: "IAPGW_TEST_POSTGRES_URL must be a postgres:// URL")
        }
        let name = "iapgw_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        _ = try Self.psql(server, "CREATE DATABASE \(name)")
        test.addTeardownBlock { _ = try? Self.psql(server, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)") }
        components.path = "/" + name
        return TestStorage(backend: .postgres(url: try XCTUnwrap(components.string), database: name, server: server))
    }

    /// Result rows of a read-only query, columns split; NULL reads as "".
    func rows(_ sql: String) throws -> [[String]] {
        let output: String
        switch backend {
        case .sqlite(let path): output = try Self.run("/usr/bin/sqlite3", ["-readonly", "-separator", "\u{1F}", path, sql])
        case .postgres(let url, _, _): output = try Self.psql(url, sql)
        }
        return output.split(separator: "\n", omittingEmptySubsequences: true)
            .map { $0.split(separator: "\u{1F}", omittingEmptySubsequences: false).map(String.init) }
    }

    func scalar(_ sql: String) throws -> String { try rows(sql).first?.first ?? "" }

    /// PostgreSQL only: runs `sql` through the server connection (to refuse or allow connections to
    /// the test database, say), with `{db}` standing for the test database's name.
    func administer(_ sql: String) throws {
        guard case .postgres(_, let database, let server) = backend else {
            throw GatewayProcessError(message: "administer is for PostgreSQL test databases")
        }
        _ = try Self.psql(server, sql.replacingOccurrences(of: "{db}", with: database))
    }

    private static func psql(_ url: String, _ sql: String) throws -> String {
        try run("/usr/bin/env", ["psql", "-X", "-q", "-A", "-t", "-F", "\u{1F}", "-v", "ON_ERROR_STOP=1", url, "-c", sql])
    }

    private static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw GatewayProcessError(message: "\(arguments.first ?? executable) failed: \(String(decoding: errors, as: UTF8.self))")
        }
        return String(decoding: data, as: UTF8.self)
    }
}

/// A config directory for a separate `iapgw serve` beside a demo deployment: the deployment's apps,
/// trust and secrets, and a fresh `TestStorage` as its database. Its port stays 0: each start gets a
/// free one (a fixed port could still be held by the killed process's connections).
func separateGatewayConfig(from harnessDirectory: URL, harnessDatabase: String, requirePostgres: Bool = false,
                           test: XCTestCase) throws -> (config: URL, storage: TestStorage) {
    let fm = FileManager.default
    let directory = fm.temporaryDirectory.appendingPathComponent("iapgw-proc-\(UUID().uuidString)", isDirectory: true)
    try fm.createDirectory(at: directory, withIntermediateDirectories: true)
    test.addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
    for sub in ["apps", "trust", "secrets"] {
        try fm.copyItem(at: harnessDirectory.appendingPathComponent(sub), to: directory.appendingPathComponent(sub))
    }
    let storage = try TestStorage.fresh(in: directory, for: test, requirePostgres: requirePostgres)
    let escaped = storage.storageURL.replacingOccurrences(of: "&", with: "&amp;")
    let xml = try String(contentsOf: harnessDirectory.appendingPathComponent("gateway.xml"), encoding: .utf8)
        .replacingOccurrences(of: "<storageURL>sqlite:\(harnessDatabase)</storageURL>", with: "<storageURL>\(escaped)</storageURL>")
    XCTAssertTrue(xml.contains("<storageURL>\(escaped)</storageURL>"), "gateway.xml names the test's storage")
    try xml.write(to: directory.appendingPathComponent("gateway.xml"), atomically: true, encoding: .utf8)
    return (directory, storage)
}

/// Settings added to a separate gateway's gateway.xml (`separateGatewayConfig`): on PostgreSQL its
/// `instanceId`, the background work's lease, and a request timeout other than the harness's 5 s.
func configureSeparateGateway(_ config: URL, storage: TestStorage, postgresInstanceId: String?, leaseSeconds: Int?,
                              requestSeconds: Int?) throws {
    var settings = ""
    if case .postgres = storage.backend, let postgresInstanceId { settings += "<instanceId>\(postgresInstanceId)</instanceId>" }
    if let leaseSeconds {
        settings += "<webhooks><leaseSeconds type=\"integer\">\(leaseSeconds)</leaseSeconds></webhooks>"
    }
    let file = config.appendingPathComponent("gateway.xml")
    var xml = try String(contentsOf: file, encoding: .utf8)
    XCTAssertTrue(xml.contains("</gateway>"))
    xml = xml.replacingOccurrences(of: "</gateway>", with: settings + "</gateway>")
    if let requestSeconds {
        let harnessTimeout = "<requestSeconds type=\"integer\">5</requestSeconds>"
        XCTAssertTrue(xml.contains(harnessTimeout))
        xml = xml.replacingOccurrences(of: harnessTimeout, with: "<requestSeconds type=\"integer\">\(requestSeconds)</requestSeconds>")
    }
    try xml.write(to: file, atomically: true, encoding: .utf8)
}
