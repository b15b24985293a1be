import Foundation
import IAPCore
import Synchronization
import TestSupport
import XCTest

/// The gateway's log output is not on the request path: with its output blocked (a full pipe to a
/// stuck log shipper), requests are still answered, the lines that did not fit are counted in
/// `/metrics`, and those written are whole.
final class LogOutputTests: XCTestCase {
    func testABurstOfRequestsIsAnsweredWhileTheLogOutputIsBlocked() async throws {
        let pipe = try UnreadPipe()
        let writer = LogWriter(fileDescriptor: pipe.writeEnd, capacityBytes: 8 * 1024)
        let gw = try await GatewayE2E.start(self, logger: Logger(minimumLevel: .info, writer: writer))
        let burst = 300
        let answered = Statuses()
        // Refused for want of an API key: each logs a `request_refused` line before any await.
        let requests = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 0..<burst {
                    group.addTask {
                        let status = try await gw.post("nonces", ["account": .string("acct-\(n)")], apiKey: .some(nil)).status
                        answered.list.withLock { $0.append(status) }
                    }
                }
                try await group.waitForAll()
            }
        }
        // Polled rather than awaited: requests stuck behind the output would keep the test from ending.
        let deadline = ContinuousClock.now + .seconds(30)
        while answered.list.withLock({ $0.count }) < burst, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        XCTAssertEqual(answered.list.withLock { $0 }, Array(repeating: 401, count: burst), "requests waited for the blocked log output")

        let metrics = try await gw.get("/metrics").text
        let dropped = try XCTUnwrap(metrics.split(separator: "\n").first { $0.hasPrefix("iapgw_log_lines_dropped_total ") })
        XCTAssertGreaterThan(Int(dropped.split(separator: " ")[1]) ?? 0, 0, "the lines that did not fit are counted")

        let (text, flushed) = pipe.readAll { writer.flush(within: .seconds(10)) }
        try await requests.value
        XCTAssertTrue(flushed)
        let lines = text.split(separator: "\n")
        XCTAssertGreaterThan(lines.count, 10)
        for line in lines { XCTAssertNoThrow(try StrictJSON().parse(Array(line.utf8)), "a line cut: \(line.prefix(200))") }
        XCTAssertTrue(lines.contains { $0.contains(#""event":"log_lines_dropped""#) }, "the gap is marked")
        XCTAssertFalse(text.contains(gw.harness.apiKey), "no secret in the log")
    }

    private final class Statuses: Sendable {
        let list = Mutex<[Int]>([])
    }
}
