import Foundation
@testable import Gateway
@testable import IAPConfig
@testable import IAPCore
import HTTPServer
import Ledger
import Synchronization
import UpstreamHTTP
import XCTest

/// Deliveries to one receiver run several at once, and still one purchase chain's events reach it
/// one after the other, in order: over real HTTP, from two dispatchers (two instances' worth) on one
/// ledger, each with two batches in flight, with some first attempts refused so that retries wait
/// behind their backoff.
final class WebhookConcurrencyTests: XCTestCase {
    private let bundleId = "com.example.hooks"

    func testAChainsEventsArriveOneAtATimeInOrderWhileDeliveriesRunConcurrently() async throws {
        let receiver = ChainTrackingReceiver(latency: .milliseconds(20), refuseFirstAttempt: { chain, index in
            (chain + index) % 7 == 0
        })
        try receiver.start(self)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hooks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let storage = try TestStorage.fresh(in: directory, for: self)
        let ledger = try SQLLedger(storage: storage.storageURL)
        let (chains, perChain) = (24, 5)
        // Interleaved as notifications arrive: every chain's first event, then every chain's second, ...
        let events = (0..<perChain).flatMap { index in
            (0..<chains).map { chain in
                WebhookEvent(kind: .entitlementChanged, idempotencyKey: "c\(chain)-e\(index)", bundleId: bundleId,
                             originalTransactionId: "chain-\(chain)", transactionId: "t\(chain)-\(index)", productId: "p",
                             state: .active, expiresDate: nil, notificationType: "DID_RENEW", subtype: nil,
                             occurredAt: Int64(index))
            }
        }
        let start = Int64(Date().timeIntervalSince1970 * 1000)
        XCTAssertEqual(try ledger.enqueueWebhooks(events, now: start), chains * perChain)
        // The test's clock: real time, moved on past each round's backoffs so retries are due at once.
        let skipped = Mutex<Int64>(0)
        let clock: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) + skipped.withLock { $0 } }
        let client = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(
            connectTimeout: .seconds(2), requestTimeout: .seconds(10), maxConnectionsPerHost: 16))
        let dispatchers = ["gw-a", "gw-b"].map { id in
            WebhookDispatcher(apps: [bundleId: webhookApp(bundleId, url: receiver.url)], ledger: AsyncSQLLedger(ledger), client: client,
                              environment: ["HOOK_SECRET": "hook-secret"], logger: .disabled,
                              identity: WorkerIdentity(id: id, isStable: false), concurrency: 4, now: clock)
        }

        let deadline = Date().addingTimeInterval(60)
        while try ledger.outboxDepth() > 0, Date() < deadline {
            // Two batches in flight per dispatcher, as its `run` has them: they share its slots.
            await withTaskGroup(of: Void.self) { group in
                for dispatcher in dispatchers {
                    for _ in 0..<2 { group.addTask { _ = try? await dispatcher.deliverDue() } }
                }
            }
            skipped.withLock { $0 += 5_000 }
        }

        let report = receiver.report
        XCTAssertEqual(try ledger.outboxDepth(), 0, "every event delivered")
        XCTAssertGreaterThan(report.refused, 0, "some first attempts were refused and retried")
        for chain in 0..<chains {
            XCTAssertEqual(report.accepted[chain], Array(0..<perChain), "chain \(chain)'s events in order, each once")
            XCTAssertTrue(report.attempts[chain, default: []].elementsEqual(report.attempts[chain, default: []].sorted()),
                          "no attempt of chain \(chain) came before an earlier event was accepted: \(report.attempts[chain] ?? [])")
        }
        XCTAssertEqual(report.mostInFlightOfOneChain, 1, "never two deliveries of one chain at once")
        XCTAssertGreaterThan(report.mostInFlight, 1, "deliveries ran concurrently")
        XCTAssertLessThanOrEqual(report.mostInFlight, 8, "at most 4 per dispatcher, over both its batches")
    }
}

/// A receiver that answers after `latency` and notes, per chain (`chain-N`, events `cN-eI`), every
/// attempt's event index, the accepted ones in order, and how many deliveries were in flight at once,
/// overall and of one chain. It refuses (503) the first attempt of the events `refuseFirstAttempt` names.
private final class ChainTrackingReceiver: Sendable {
    struct Report: Sendable {
        var attempts: [Int: [Int]] = [:]
        var accepted: [Int: [Int]] = [:]
        var refused = 0
        var inFlight = 0
        var inFlightOfChain: [Int: Int] = [:]
        var mostInFlight = 0
        var mostInFlightOfOneChain = 0
        var refusedOnce: Set<String> = []
    }

    private let latency: Duration
    private let refuseFirstAttempt: @Sendable (Int, Int) -> Bool
    private let state = Mutex(Report())
    private let server: Mutex<HTTPServer?> = Mutex(nil)

    init(latency: Duration, refuseFirstAttempt: @escaping @Sendable (Int, Int) -> Bool) {
        self.latency = latency
        self.refuseFirstAttempt = refuseFirstAttempt
    }

    func start(_ test: XCTestCase) throws {
        let s = try HTTPServer(configuration: HTTPServerConfiguration(port: 0)) { [self] request in await answer(request) }
        try s.start()
        server.withLock { $0 = s }
        test.addTeardownBlock { await s.shutdown(gracePeriod: .seconds(1)) }
    }

    var url: String { "http://127.0.0.1:\(server.withLock { $0?.port ?? 0 })/hooks" }
    var report: Report { state.withLock { $0 } }

    private func answer(_ request: HTTPRequest) async -> HTTPResponse {
        let key = request.headers["Idempotency-Key"] ?? ""
        let parts = key.dropFirst().split(separator: "-e").compactMap { Int($0) }
        guard parts.count == 2 else { return HTTPResponse(status: 400) }
        let (chain, index) = (parts[0], parts[1])
        state.withLock { s in
            s.attempts[chain, default: []].append(index)
            s.inFlight += 1
            s.inFlightOfChain[chain, default: 0] += 1
            s.mostInFlight = max(s.mostInFlight, s.inFlight)
            s.mostInFlightOfOneChain = max(s.mostInFlightOfOneChain, s.inFlightOfChain[chain] ?? 0)
        }
        try? await Task.sleep(for: latency)
        return state.withLock { s in
            s.inFlight -= 1
            s.inFlightOfChain[chain, default: 0] -= 1
            if refuseFirstAttempt(chain, index), s.refusedOnce.insert(key).inserted {
                s.refused += 1
                return HTTPResponse(status: 503)
            }
            s.accepted[chain, default: []].append(index)
            return HTTPResponse(status: 200)
        }
    }
}
