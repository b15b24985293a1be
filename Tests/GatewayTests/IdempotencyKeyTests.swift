import AppStoreSimulator
import Foundation
import IAPCore
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A purchase is credited exactly once even when its answer is lost: a keyed call's answer is stored
/// with the claim, and its retry gets it again. Real HTTP to a gateway process of its own, on
/// SQLite, and on PostgreSQL when the suite runs there (Scripts/test.sh).
final class IdempotencyKeyTests: XCTestCase {
    private struct Deployment {
        let gw: GatewayE2E
        let config: URL
        let storage: TestStorage
        var instance: GatewayProcess
        var app: String

        func verify(_ transactionId: String, account: String, key: String?) async throws -> GatewayAnswer {
            try await gw.send("POST", "\(app)/verify", body: Self.body(transactionId, account: account),
                              headers: key.map { [("Idempotency-Key", $0)] } ?? [])
        }

        static func body(_ transactionId: String, account: String) -> [UInt8] {
            Array(JSONValue.object(["account": .string(account), "transactionId": .string(transactionId)]).jsonText.utf8)
        }

        /// Rows of `transactions` granting `transactionId`.
        func granted(_ transactionId: String) throws -> Int {
            Int(try storage.scalar("SELECT count(*) FROM transactions WHERE transaction_id = '\(transactionId)'")) ?? -1
        }
    }

    private func deploy(requirePostgres: Bool = false, storageSeconds: Int? = nil) async throws -> Deployment {
        let gw = try await GatewayE2E.start(self)
        let (config, storage) = try separateGatewayConfig(from: gw.harness.directory, harnessDatabase: gw.sqlitePath,
                                                          requirePostgres: requirePostgres, test: self)
        if let storageSeconds {
            let file = config.appendingPathComponent("gateway.xml")
            let xml = try String(contentsOf: file, encoding: .utf8)
            XCTAssertTrue(xml.contains("</timeouts>"))
            try xml.replacingOccurrences(of: "</timeouts>",
                                         with: "<storageSeconds type=\"integer\">\(storageSeconds)</storageSeconds></timeouts>")
                .write(to: file, atomically: true, encoding: .utf8)
        }
        let instance = try GatewayProcess(config: config, environment: storage.processEnvironment)
        addTeardownBlock { instance.kill9() }
        let app = "http://127.0.0.1:\(try await instance.port())/v1/apps/\(gw.bundleId)"
        return Deployment(gw: gw, config: config, storage: storage, instance: instance, app: app)
    }

    /// Sends the request and closes the connection without reading a byte of the answer: the
    /// backend whose timeout was shorter than the gateway's work, or a proxy that dropped it.
    private func sendAndHangUp(_ url: String, body: [UInt8], headers: [(String, String)]) throws {
        let parsed = try XCTUnwrap(URLComponents(string: url))
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(try XCTUnwrap(parsed.port)).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        XCTAssertEqual(connected, 0)
        var head = "POST \(parsed.path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        let bytes = Array(head.utf8) + body
        XCTAssertEqual(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }, bytes.count)
    }

    private func waitFor(_ what: String, within seconds: Double = 20, _ condition: () throws -> Bool) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        XCTFail("timed out waiting for \(what)")
    }

    func testAKeyedClaimWhoseClientHungUpBeforeTheAnswerIsReplayedAsNewlyGranted() async throws {
        let d = try await deploy()
        let purchase = try d.gw.buy(GatewayE2E.removeAds, owner: "device-hangup")
        // Apple answers slowly, so the backend is gone long before the gateway's answer is ready.
        d.gw.simulator.faults.setLatency(milliseconds: 300)
        try sendAndHangUp("\(d.app)/verify", body: Deployment.body(purchase.transactionId, account: "hana"),
                          headers: [("Authorization", "Bearer \(d.gw.harness.apiKey)"), ("Idempotency-Key", "order-7f3a")])
        try await waitFor("the hung-up claim to commit") { try d.granted(purchase.transactionId) == 1 }
        d.gw.simulator.faults.setLatency(milliseconds: 0)

        let retried = try await d.verify(purchase.transactionId, account: "hana", key: "order-7f3a")
        XCTAssertEqual(retried.status, 200, retried.text)
        XCTAssertEqual(retried.headers["idempotent-replayed"], "true")
        XCTAssertEqual(retried.json["newlyGranted"], .array([.string(purchase.transactionId)]),
                       "the lost answer's newlyGranted is given again: the backend credits it now")
        XCTAssertEqual(retried.json["alreadyGranted"], .array([]))
        // A retry under the same key again is the same answer, byte for byte.
        let again = try await d.verify(purchase.transactionId, account: "hana", key: "order-7f3a")
        XCTAssertEqual(again.body, retried.body)
        // Without the key the gateway can only say what it knows now.
        let unkeyed = try await d.verify(purchase.transactionId, account: "hana", key: nil)
        XCTAssertEqual(unkeyed.json["alreadyGranted"], .array([.string(purchase.transactionId)]), unkeyed.text)
        XCTAssertNil(unkeyed.headers["idempotent-replayed"])
    }

    func testAKeyedAnswerIsReplayedAfterTheGatewayRestarts() async throws {
        var d = try await deploy()
        let purchase = try d.gw.buy(GatewayE2E.removeAds, owner: "device-restart")
        let first = try await d.verify(purchase.transactionId, account: "rei", key: "restart-1")
        XCTAssertEqual(first.status, 200, first.text)
        XCTAssertEqual(first.json["newlyGranted"], .array([.string(purchase.transactionId)]))
        d.instance.kill9()
        d.instance = try GatewayProcess(config: d.config, environment: d.storage.processEnvironment)
        let restarted = d.instance
        addTeardownBlock { restarted.kill9() }
        d.app = "http://127.0.0.1:\(try await d.instance.port())/v1/apps/\(d.gw.bundleId)"
        let replayed = try await d.verify(purchase.transactionId, account: "rei", key: "restart-1")
        XCTAssertEqual(replayed.status, 200, replayed.text)
        XCTAssertEqual(replayed.headers["idempotent-replayed"], "true")
        XCTAssertEqual(replayed.body, first.body)
    }

    func testTheSameKeyWithAnotherRequestIsRefusedAndAMalformedKeyIsABadRequest() async throws {
        let d = try await deploy()
        let purchase = try d.gw.buy(GatewayE2E.removeAds, owner: "device-reuse")
        let other = try d.gw.buy(GatewayE2E.removeAds, owner: "device-reuse-2")
        let first = try await d.verify(purchase.transactionId, account: "uma", key: "reuse-1")
        XCTAssertEqual(first.status, 200, first.text)
        let reused = try await d.verify(other.transactionId, account: "uma", key: "reuse-1")
        XCTAssertEqual(reused.status, 422, reused.text)
        XCTAssertEqual(reused.errorCode, "IDEMPOTENCY_KEY_REUSED")
        XCTAssertEqual(try d.granted(other.transactionId), 0, "the other request was not run")
        // The key names one request on one route: the same key on the nonce route is another request.
        let nonce = try await d.gw.send("POST", "\(d.app)/nonces", body: Array(#"{"account":"uma"}"#.utf8),
                                        headers: [("Idempotency-Key", "reuse-1")])
        XCTAssertEqual(nonce.errorCode, "IDEMPOTENCY_KEY_REUSED", nonce.text)

        for bad in ["", String(repeating: "k", count: 256), "caf\u{E9}", "tab\tkey"] {
            let answer = try await d.verify(other.transactionId, account: "uma", key: bad)
            XCTAssertEqual(answer.status, 400, "\(bad.debugDescription): \(answer.text)")
            XCTAssertEqual(answer.errorCode, "MALFORMED_REQUEST")
        }
        XCTAssertEqual(try d.granted(other.transactionId), 0)
        let longest = try await d.verify(other.transactionId, account: "uma", key: String(repeating: "k", count: 255))
        XCTAssertEqual(longest.status, 200, longest.text)
    }

    func testARetryWhileTheFirstIsStillBeingAnsweredIsInFlight() async throws {
        let d = try await deploy()
        let purchase = try d.gw.buy(GatewayE2E.removeAds, owner: "device-inflight")
        d.gw.simulator.faults.setLatency(milliseconds: 1_500)
        async let first = d.verify(purchase.transactionId, account: "ida", key: "inflight-1")
        try await Task.sleep(for: .milliseconds(400))
        let second = try await d.verify(purchase.transactionId, account: "ida", key: "inflight-1")
        XCTAssertEqual(second.status, 409, second.text)
        XCTAssertEqual(second.errorCode, "IDEMPOTENCY_KEY_IN_FLIGHT")
        XCTAssertEqual(second.json["error"]?["retryable"], .bool(true))
        XCTAssertNotNil(second.headers["retry-after"])
        let answered = try await first
        XCTAssertEqual(answered.json["newlyGranted"], .array([.string(purchase.transactionId)]), answered.text)
        d.gw.simulator.faults.setLatency(milliseconds: 0)
        let after = try await d.verify(purchase.transactionId, account: "ida", key: "inflight-1")
        XCTAssertEqual(after.body, answered.body)
        XCTAssertEqual(after.headers["idempotent-replayed"], "true")
    }

    func testAKeyedNonceIsHandedOutOnce() async throws {
        let d = try await deploy()
        let body = Array(#"{"account":"nia"}"#.utf8)
        let first = try await d.gw.send("POST", "\(d.app)/nonces", body: body, headers: [("Idempotency-Key", "nonce-1")])
        let retried = try await d.gw.send("POST", "\(d.app)/nonces", body: body, headers: [("Idempotency-Key", "nonce-1")])
        XCTAssertEqual(first.status, 200, first.text)
        XCTAssertEqual(retried.body, first.body)
        XCTAssertEqual(retried.headers["idempotent-replayed"], "true")
        XCTAssertEqual(try d.storage.scalar("SELECT count(*) FROM nonces WHERE account = 'nia'"), "1")
    }

    /// PostgreSQL frozen (SIGSTOP) while claims wait: each is answered 503 at the storage deadline,
    /// and none of them commits once the server runs again, keyed or not; their retries grant.
    func testClaimsAnswered503WhileStorageWasFrozenNeverCommitAndTheirRetriesSayNewlyGranted() async throws {
        let d = try await deploy(requirePostgres: true, storageSeconds: 2)
        let keyed = try d.gw.buy(GatewayE2E.removeAds, owner: "device-frozen-keyed")
        let unkeyed = try d.gw.buy(GatewayE2E.removeAds, owner: "device-frozen-unkeyed")
        let cluster = try FrozenCluster(dataDirectory: try d.storage.scalar("SHOW data_directory"))
        addTeardownBlock { cluster.thaw() }
        cluster.freeze()
        async let keyedAnswer = d.verify(keyed.transactionId, account: "fay", key: "frozen-1")
        async let unkeyedAnswer = d.verify(unkeyed.transactionId, account: "gus", key: nil)
        let (a, b) = try await (keyedAnswer, unkeyedAnswer)
        // Held frozen past the deadline, then let go: the statements the claims were waiting on finish.
        try await Task.sleep(for: .seconds(1))
        cluster.thaw()
        for answer in [a, b] {
            XCTAssertEqual(answer.status, 503, answer.text)
            XCTAssertEqual(answer.errorCode, "STORAGE_UNAVAILABLE")
        }
        // Give a late COMMIT every chance to happen.
        try await Task.sleep(for: .seconds(3))
        XCTAssertEqual(try d.granted(keyed.transactionId), 0, "a 503 must mean nothing committed")
        XCTAssertEqual(try d.granted(unkeyed.transactionId), 0, "a 503 must mean nothing committed, later neither")

        let retriedKeyed = try await d.verify(keyed.transactionId, account: "fay", key: "frozen-1")
        XCTAssertEqual(retriedKeyed.json["newlyGranted"], .array([.string(keyed.transactionId)]), retriedKeyed.text)
        let retriedUnkeyed = try await d.verify(unkeyed.transactionId, account: "gus", key: nil)
        XCTAssertEqual(retriedUnkeyed.json["newlyGranted"], .array([.string(unkeyed.transactionId)]), retriedUnkeyed.text)
    }
}
