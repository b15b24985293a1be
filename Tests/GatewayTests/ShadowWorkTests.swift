@testable import Gateway
import IAPCore
import Ledger
import Synchronization
import TestSupport
import XCTest

/// The comparisons answers do not wait for: bounded, and finished at shutdown.
final class ShadowWorkTests: XCTestCase {
    /// Lets jobs wait until the test opens it.
    private final class Gate: Sendable {
        private let state = Mutex<(open: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))
        func wait() async {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let open = state.withLock { s -> Bool in
                    if s.open { return true }
                    s.waiting.append(c)
                    return false
                }
                if open { c.resume() }
            }
        }
        func open() {
            for c in state.withLock({ s -> [CheckedContinuation<Void, Never>] in
                s.open = true
                defer { s.waiting = [] }
                return s.waiting
            }) { c.resume() }
        }
    }

    func testShadowWorkBeyondTheLimitIsDroppedAndCountedWhileTakenWorkAllRuns() async {
        let dropped = Mutex(0)
        let ran = Mutex<[Int]>([])
        let gate = Gate()
        let queue = ShadowQueue(limit: 3, concurrency: 1) { dropped.withLock { $0 += 1 } }

        let taken = (0..<5).map { i in queue.submit { await gate.wait(); ran.withLock { $0.append(i) } } }
        XCTAssertEqual(queue.depth, 3)
        gate.open()
        await queue.drain()

        XCTAssertEqual(taken, [true, true, true, false, false])
        XCTAssertEqual(dropped.withLock { $0 }, 2)
        XCTAssertEqual(ran.withLock { $0 }, [0, 1, 2], "one at a time, in order")
        XCTAssertEqual(queue.depth, 0)
    }

    func testDrainWaitsForTheRunningAndWaitingJobsAndThenRefusesNewOnes() async {
        let finished = Mutex(0)
        let gate = Gate()
        let queue = ShadowQueue(limit: 10, concurrency: 2)
        for _ in 0..<6 { queue.submit { await gate.wait(); finished.withLock { $0 += 1 } } }

        let drain = Task { await queue.drain(); return finished.withLock { $0 } }
        gate.open()
        let finishedWhenDrained = await drain.value

        XCTAssertEqual(finishedWhenDrained, 6, "drain returned before every taken job finished")
        XCTAssertFalse(queue.submit {}, "a drained queue takes no new work")
    }

    // End to end: the Server API leg of a shadow verification is still running when the answer
    // arrives (Apple is slow); finishing the gateway's shadow work stores its comparison, instead of
    // leaving a detached task that shutdown never waits for.
    func testFinishingShadowWorkStoresTheComparisonTheAnswerDidNotWaitFor() async throws {
        let gw = try await GatewayE2E.start(self) { $0.receiptRouting = "shadow" }
        let purchase = try gw.buy(owner: "device-alice")
        gw.simulator.faults.setLatency(milliseconds: 400)

        let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: "alice")
        let storedAtAnswer = try gw.harness.parts.storedLedger.comparisons(ComparisonQuery(bundleId: gw.bundleId, limit: 10))
        await gw.harness.service.finishShadowWork()
        let storedAfter = try gw.harness.parts.storedLedger.comparisons(ComparisonQuery(bundleId: gw.bundleId, limit: 10))

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(storedAtAnswer.count, 0, "the answer waited for the shadow comparison")
        XCTAssertEqual(storedAfter.count, 1)
        XCTAssertEqual(storedAfter.first?.agreed, true)
    }

    // Through the production binary: `iapgw serve` told to stop (SIGTERM) while a shadow comparison
    // still waits on a slow Apple stores it before it exits, and exits 0.
    func testServeTerminatedWhileAShadowComparisonRunsStoresItAndExitsZero() async throws {
        let gw = try await GatewayE2E.start(self) { $0.receiptRouting = "shadow" }
        let (config, storage) = try separateGatewayConfig(from: gw.harness.directory, harnessDatabase: gw.sqlitePath, test: self)
        let gateway = try GatewayProcess(config: config, environment: storage.processEnvironment)
        addTeardownBlock { gateway.kill9() }
        let app = "http://127.0.0.1:\(try await gateway.port())/v1/apps/\(gw.bundleId)"
        let purchase = try gw.buy(owner: "device-alice")
        let nonce = try await gw.send("POST", "\(app)/nonces", body: Array(#"{"account":"alice"}"#.utf8))
        gw.simulator.faults.setLatency(milliseconds: 400)

        let answer = try await gw.send("POST", "\(app)/verify", body: Array(JSONValue.object([
            "account": "alice", "receipt": .string(purchase.receiptBase64),
            "nonce": try XCTUnwrap(nonce.json["nonce"]),
        ]).jsonText.utf8))
        kill(gateway.process.processIdentifier, SIGTERM)
        let deadline = Date().addingTimeInterval(30)
        while gateway.process.isRunning, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertFalse(gateway.process.isRunning, "serve did not stop within 30 s")
        XCTAssertEqual(gateway.process.terminationStatus, 0, gateway.log)
        XCTAssertEqual(try storage.rows("SELECT count(*) FROM comparisons"), [["1"]], gateway.log)
    }
}
