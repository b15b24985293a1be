import AppStoreSimulator
import Foundation
@testable import Gateway
import IAPCore
@testable import Ledger
import TestSupport
import XCTest

/// Storage that stops answering: requests answer 503 + Retry-After within the storage deadline,
/// `/readyz` answers 503 within a second, `/healthz` and `/metrics` keep answering, and the gateway
/// recovers by itself. A frozen PostgreSQL (SIGSTOP of the whole test cluster), and a full SQLite
/// database (`PRAGMA max_page_count` at the file's current size: SQLite answers "database or disk
/// is full", SQLITE_FULL, exactly as on a full filesystem, with no root-only tmpfs).
final class StorageDeadlineTests: XCTestCase {
    func testAFrozenPostgreSQLCostsEachRequestTheStorageDeadlineAndNeverTheHealthProbes() async throws {
        let gw = try await GatewayE2E.start(self)
        let (config, storage) = try separateGatewayConfig(from: gw.harness.directory, harnessDatabase: gw.sqlitePath,
                                                          requirePostgres: true, test: self)
        let file = config.appendingPathComponent("gateway.xml")
        let xml = try String(contentsOf: file, encoding: .utf8)
        XCTAssertTrue(xml.contains("</timeouts>"))
        try xml.replacingOccurrences(of: "</timeouts>", with: "<storageSeconds type=\"integer\">2</storageSeconds></timeouts>")
            .write(to: file, atomically: true, encoding: .utf8)
        let instance = try GatewayProcess(config: config, environment: storage.processEnvironment)
        addTeardownBlock { instance.kill9() }
        let base = "http://127.0.0.1:\(try await instance.port())"
        let app = "\(base)/v1/apps/\(gw.bundleId)"
        let purchase = try gw.buy(owner: "device-frozen")
        let nonceBody = Array(JSONValue.object(["account": "fay"]).jsonText.utf8)
        let verifyBody = Array(JSONValue.object(["account": "fay", "transactionId": .string(purchase.transactionId)]).jsonText.utf8)
        let before = try await gw.send("GET", "\(base)/readyz")
        XCTAssertEqual(before.status, 200, before.text)
        let scraped = try await gw.send("GET", "\(base)/metrics")
        XCTAssertTrue(scraped.text.contains("iapgw_outbox_depth 0"), scraped.text)

        let cluster = try FrozenCluster(dataDirectory: try storage.scalar("SHOW data_directory"))
        addTeardownBlock { cluster.thaw() }
        cluster.freeze()

        // More requests in flight than the cooperative pool has threads (two on a 2-core machine).
        let timed = try await withThrowingTaskGroup(of: (String, GatewayAnswer, Duration).self) { group in
            for i in 0..<8 {
                let (path, body) = i % 2 == 0 ? ("nonces", nonceBody) : ("verify", verifyBody)
                group.addTask {
                    let started = ContinuousClock.now
                    let answer = try await gw.send("POST", "\(app)/\(path)", body: body)
                    return (path, answer, ContinuousClock.now - started)
                }
            }
            try await Task.sleep(for: .milliseconds(300))
            // With those requests stuck on storage, the probes still answer, and promptly.
            var probes: [(String, GatewayAnswer, Duration)] = []
            for path in ["/healthz", "/metrics", "/readyz"] {
                let started = ContinuousClock.now
                let answer = try await gw.send("GET", base + path)
                probes.append((path, answer, ContinuousClock.now - started))
            }
            var answers: [(String, GatewayAnswer, Duration)] = []
            for try await answer in group { answers.append(answer) }
            return probes + answers
        }
        cluster.thaw()

        let byPath = Dictionary(grouping: timed, by: \.0)
        let health = try XCTUnwrap(byPath["/healthz"]?.first)
        XCTAssertEqual(health.1.status, 200, health.1.text)
        XCTAssertLessThan(health.2, .seconds(1), "/healthz never waits on storage")
        let metrics = try XCTUnwrap(byPath["/metrics"]?.first)
        XCTAssertEqual(metrics.1.status, 200, metrics.1.text)
        XCTAssertLessThan(metrics.2, .seconds(1), "/metrics never waits on storage")
        XCTAssertTrue(metrics.1.text.contains("iapgw_outbox_depth 0"), "the last gauges read: \(metrics.1.text)")
        XCTAssertTrue(metrics.1.text.contains("iapgw_storage_gauges_age_seconds"), metrics.1.text)
        let ready = try XCTUnwrap(byPath["/readyz"]?.first)
        XCTAssertEqual(ready.1.status, 503, ready.1.text)
        XCTAssertEqual(ready.1.errorCode, "STORAGE_UNAVAILABLE")
        // One second is the probe's own deadline; the margin is for a shared, busy CPU.
        XCTAssertLessThan(ready.2, .milliseconds(1_500), "/readyz answers within its 1 s deadline")
        for (path, answer, elapsed) in timed where path == "nonces" || path == "verify" {
            XCTAssertEqual(answer.status, 503, "\(path): \(answer.text)")
            XCTAssertEqual(answer.errorCode, "STORAGE_UNAVAILABLE", "\(path): \(answer.text)")
            XCTAssertNotNil(answer.headers["retry-after"], path)
            XCTAssertFalse(answer.text.contains("PostgreSQL"), "no engine internals for the client: \(answer.text)")
            XCTAssertLessThan(elapsed, .seconds(5), "\(path) answers within the 2 s storage deadline (plus margin)")
        }

        let thawed = ContinuousClock.now
        while try await gw.send("GET", "\(base)/readyz").status != 200 {
            guard ContinuousClock.now - thawed < .seconds(20) else { return XCTFail("not ready again 20 s after the thaw") }
            try await Task.sleep(for: .milliseconds(100))
        }
        let granted = try await gw.send("POST", "\(app)/verify", body: verifyBody)
        XCTAssertEqual(granted.status, 200, granted.text)
    }

    func testAFullSQLiteDatabaseMakesTheGatewayNotReadyUntilWritesSucceedAgain() async throws {
        let gw = try await GatewayE2E.start(self)
        let ready = try await gw.get("/readyz")
        XCTAssertEqual(ready.status, 200, ready.text)
        let database = try XCTUnwrap(gw.harness.parts.storedLedger.database as? SQLiteDatabase)
        // No page beyond those the file has now: what a full filesystem does to SQLite.
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.executeScript("PRAGMA max_page_count = 1", operation: "configure")
        }

        var refused: GatewayAnswer?
        for i in 0..<5_000 where refused == nil {
            let answer = try await gw.post("nonces", ["account": .string("account-\(i)")])
            if answer.status != 200 { refused = answer }
        }
        let full = try XCTUnwrap(refused, "the database filled up")
        XCTAssertEqual(full.status, 503, full.text)
        XCTAssertEqual(full.errorCode, "STORAGE_UNAVAILABLE")
        XCTAssertNotNil(full.headers["retry-after"])
        for detail in ["SQLite", "disk is full"] {
            XCTAssertFalse(full.text.contains(detail), "the client hears no engine internals: \(full.text)")
        }
        let notReady = try await gw.get("/readyz")
        XCTAssertEqual(notReady.status, 503, "writes fail, so not ready: \(notReady.text)")
        XCTAssertEqual(notReady.errorCode, "STORAGE_UNAVAILABLE")
        try await Task.sleep(for: .milliseconds(500))
        let stillNotReady = try await gw.get("/readyz")
        XCTAssertEqual(stillNotReady.status, 503, "background work writing nothing proves nothing: \(stillNotReady.text)")

        // Space is freed.
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.executeScript("PRAGMA max_page_count = 1073741823", operation: "configure")
        }
        let recovered = try await gw.get("/readyz")
        XCTAssertEqual(recovered.status, 200, recovered.text)
        let nonce = try await gw.post("nonces", ["account": "after"])
        XCTAssertEqual(nonce.status, 200, nonce.text)
    }
}
