import AppStoreSimulator
import Foundation
import IAPCore
import TestSupport
import XCTest

/// A gateway SIGKILLed while a Finish Transaction call hangs at Apple does not leave the purchase
/// unfinished for a whole lease: its own next incarnation takes the row back at start; on
/// PostgreSQL another instance takes it over once the holder's renewed lease runs out.
final class FinishCrashTests: XCTestCase {
    /// The restart case sets the lease to 120 s: only taking back the previous incarnation's lease
    /// sends the finish within this.
    private let restartBound: TimeInterval = 10

    func testAGatewayRestartedAfterASIGKILLMidFinishSendsItAtOnce() async throws {
        let (gw, config, storage) = try await deployment(leaseSeconds: 120, postgresInstanceId: "gw-a", requestSeconds: nil)
        let transactionId = try await grantAndKill(gw, config: config, storage: storage) { gateway in gateway.kill9() }
        let killed = Date()
        let second = try GatewayProcess(config: config, environment: storage.processEnvironment)
        addTeardownBlock { second.kill9() }

        try await assertFinished(transactionId, gw, storage: storage, since: killed, within: restartBound)
        XCTAssertTrue(second.log.contains("finish_leases_reclaimed"), "the restart took the row back")
    }

    /// PostgreSQL: an idle second instance is up while the holder hangs on Apple; it sends nothing
    /// while the holder renews its lease, and the finish once the holder is SIGKILLed, within one
    /// (default, 10 s) lease.
    func testAnotherInstanceTakesOverAFinishWithinOneLeaseWhenItsHolderIsSIGKILLed() async throws {
        // Apple's hang outlasts a renewal; one attempt (30 s request timeout) fills the 20 s budget.
        let (gw, config, storage) = try await deployment(leaseSeconds: nil, postgresInstanceId: nil, requestSeconds: 30,
                                                         requirePostgres: true)
        let lease: TimeInterval = 10
        var standby: GatewayProcess?
        let transactionId = try await grantAndKill(gw, config: config, storage: storage) { gateway in
            let other = try GatewayProcess(config: config, environment: storage.processEnvironment)
            standby = other
            addTeardownBlock { other.kill9() }
            _ = try await other.port()
            let firstLeaseEnd = try XCTUnwrap(Int64(try storage.scalar("SELECT next_attempt_at FROM finish_outbox")))
            try await eventually("the holder renews its lease while it waits on Apple", seconds: lease) {
                try (Int64(storage.scalar("SELECT next_attempt_at FROM finish_outbox")) ?? 0) > firstLeaseEnd
            }
            XCTAssertEqual(gw.simulator.faults.counts.requests, 1, "nobody else called Apple for a row its live holder renews")
            gateway.kill9()
        }
        let killed = Date()
        try await assertFinished(transactionId, gw, storage: storage, since: killed, within: lease + 3)
        XCTAssertNotNil(standby)
    }

    // MARK: Moves

    private func deployment(leaseSeconds: Int?, postgresInstanceId: String?, requestSeconds: Int?,
                            requirePostgres: Bool = false) async throws -> (GatewayE2E, URL, TestStorage) {
        let gw = try await GatewayE2E.start(self) {
            $0.finishTransactions = true
            // The verify asks Apple nothing: every Server API call the simulator sees is a finish.
            $0.localOnlyJWS = true
        }
        let (config, storage) = try separateGatewayConfig(from: gw.harness.directory, harnessDatabase: gw.sqlitePath,
                                                          requirePostgres: requirePostgres, test: self)
        try configureSeparateGateway(config, storage: storage, postgresInstanceId: postgresInstanceId,
                                     leaseSeconds: leaseSeconds, requestSeconds: requestSeconds)
        return (gw, config, storage)
    }

    /// Starts a gateway with Apple hanging on every call, has it grant a purchase (a signed
    /// transaction, trusted locally), waits until its finisher holds the row and is in the call,
    /// hands the gateway to `kill`, then lets Apple answer again. Returns the transaction's id.
    private func grantAndKill(_ gw: GatewayE2E, config: URL, storage: TestStorage,
                              kill: (GatewayProcess) async throws -> Void) async throws -> String {
        let gateway = try GatewayProcess(config: config, environment: storage.processEnvironment)
        addTeardownBlock { gateway.kill9() }
        let base = "http://127.0.0.1:\(try await gateway.port())"
        gw.simulator.faults.hangNext(1_000, milliseconds: 60_000)
        let before = gw.simulator.faults.counts.requests
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-kim")
        let jws = try gw.simulator.signedTransaction(transactionId: purchase.transactionId)
        let granted = try await gw.send("POST", "\(base)/v1/apps/\(gw.bundleId)/verify", body: Array(JSONValue.object([
            "account": .string("kim"), "signedTransaction": .string(jws)]).jsonText.utf8))
        XCTAssertEqual(granted.status, 200, granted.text)
        try await eventually("the finisher holds the row and is calling Apple", seconds: 10) {
            try storage.scalar("SELECT count(*) FROM finish_outbox WHERE leased_by IS NOT NULL AND finished_at IS NULL") == "1"
                && gw.simulator.faults.counts.requests > before
        }
        XCTAssertEqual(gw.simulator.finishTransactionCalls, [])
        try await kill(gateway)
        gw.simulator.faults.reset()
        return purchase.transactionId
    }

    private func assertFinished(_ transactionId: String, _ gw: GatewayE2E, storage: TestStorage, since killed: Date,
                                within seconds: TimeInterval, file: StaticString = #filePath, line: UInt = #line) async throws {
        try await eventually("the finish is sent and recorded", seconds: seconds + 5, file: file, line: line) {
            try storage.scalar("SELECT count(*) FROM finish_outbox WHERE finished_at IS NOT NULL") == "1"
        }
        let took = Date().timeIntervalSince(killed)
        print("finish sent \(String(format: "%.1f", took)) s after the SIGKILL")
        XCTAssertLessThanOrEqual(took, seconds, "the finish was sent within the bound", file: file, line: line)
        XCTAssertEqual(gw.simulator.finishTransactionCalls.map(\.transactionId), [transactionId], file: file, line: line)
    }

    private func eventually(_ what: String, seconds: Double, file: StaticString = #filePath, line: UInt = #line,
                            _ condition: () throws -> Bool) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        XCTFail("timed out waiting until \(what)", file: file, line: line)
    }
}
