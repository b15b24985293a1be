import Foundation
import XCTest

/// A fresh schema on the PostgreSQL server named by `IAPGW_TEST_POSTGRES_URL` (Scripts/test.sh
/// starts one on loopback), dropped when the test ends. Tests that need several gateway processes
/// on one shared database use it; without the variable they are skipped.
struct PostgresTestDatabase {
    /// The storage URL of the schema (libpq's `options` puts it first on the search path).
    let storageURL: String

    static func make(_ test: XCTestCase) throws -> PostgresTestDatabase {
        guard let server = ProcessInfo.processInfo.environment["IAPGW_TEST_POSTGRES_URL"], !server.isEmpty else {
            throw XCTSkip("IAPGW_TEST_POSTGRES_URL is not set (Scripts/test.sh sets it when PostgreSQL is installed)")
        }
        let schema = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        _ = try psql(server, "CREATE SCHEMA \(schema)")
        test.addTeardownBlock { _ = try? psql(server, "DROP SCHEMA \(schema) CASCADE") }
        let separator = server.contains("?") ? "&" : "?"
        return PostgresTestDatabase(storageURL: server + separator + "options=-csearch_path%3D\(schema)")
    }

    /// One query's rows, `|`-separated columns, one line per row.
    func query(_ sql: String) throws -> String { try Self.psql(storageURL, sql) }

    static func psql(_ url: String, _ sql: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        process.arguments = ["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", sql]
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        let problem = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw GatewayProcessError(message: "psql failed: \(String(decoding: problem, as: UTF8.self))")
        }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
