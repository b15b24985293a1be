import Foundation
@testable import Gateway
@testable import IAPConfig
@testable import IAPCore
import Ledger
import UpstreamHTTP
import XCTest

/// Instances share the outbox through leases: a batch taken for delivery is another instance's again
/// once its lease ends, so the instance that took it must not send from it any more by then.
final class WebhookLeaseTests: XCTestCase {
    private let bundleId = "com.example.hooks"

    func testADispatcherWhoseLeaseRanOutMeanwhileSendsNoMoreOfItsBatch() async throws {
        let receiver = WebhookReceiver()
        try receiver.start(self)
        receiver.expectSecret("hook-secret")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hooks-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let ledger = try SQLLedger(storage: "sqlite:" + directory.appendingPathComponent("ledger.sqlite").path)
        // One chain: its events go one after the other, whatever the dispatcher's concurrency.
        try ledger.enqueueWebhooks(["k1", "k2"].map { key in
            WebhookEvent(kind: .entitlementChanged, idempotencyKey: key, bundleId: bundleId, originalTransactionId: "1000",
                         transactionId: nil, productId: "p", state: .active, expiresDate: nil,
                         notificationType: "DID_RENEW", subtype: nil, occurredAt: 1)
        }, now: 1_000)
        let client = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(
            connectTimeout: .seconds(2), requestTimeout: .seconds(2)))
        // Each delivery seems to take a minute (a slow receiver, a stalled database checkout): after the
        // first, the batch's 10 s lease has long run out, and its renewal (every 3.3 s, on the same
        // stalled storage) has not come. The clock moves when the receiver accepted a delivery (the
        // batch records its deliveries only at its end); the attempt's watchdog looked at the lease
        // before the request left, and its next look (an hour on) comes after the test is over, as
        // does every other wait of the dispatcher.
        let delivered: @Sendable () -> Int64 = { Int64(receiver.accepted.count) }
        let dispatcher = WebhookDispatcher(apps: [bundleId: webhookApp(bundleId, url: receiver.url)], ledger: AsyncSQLLedger(ledger), client: client,
                                           environment: ["HOOK_SECRET": "hook-secret"], logger: .disabled,
                                           leaseMillis: 10_000, now: { 1_000 + delivered() * 60_000 },
                                           wait: { _ in try await Task.sleep(for: .seconds(3_600)) })
        let first = try await dispatcher.deliverDue(limit: 2)
        XCTAssertEqual(first, 1)
        XCTAssertEqual(receiver.deliveries.map(\.idempotencyKey), ["k1"])
        XCTAssertEqual(try ledger.outboxDepth(), 1, "the other event waits for the next lease, not lost")
        let later = try await dispatcher.deliverDue(limit: 2)
        XCTAssertEqual(later, 1)
        XCTAssertEqual(receiver.deliveries.map(\.idempotencyKey), ["k1", "k2"])
    }

    /// Issue 10 item 7: the lease is renewed while the receiver takes its time; once a renewal finds the
    /// event taken by another holder, the attempt in flight is aborted (not left to run to its timeout),
    /// and the event is neither marked delivered nor failed by the one that lost it.
    func testAnAttemptIsAbortedOnceARenewalFindsItsEventTakenByAnotherHolder() async throws {
        let receiver = WebhookReceiver()
        try receiver.start(self)
        receiver.expectSecret("hook-secret")
        receiver.hold()
        addTeardownBlock { receiver.release() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hooks-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let ledger = try SQLLedger(storage: "sqlite:" + directory.appendingPathComponent("ledger.sqlite").path)
        try ledger.enqueueWebhooks([WebhookEvent(kind: .entitlementChanged, idempotencyKey: "k1", bundleId: bundleId,
                                                 originalTransactionId: nil, transactionId: nil, productId: "p", state: .active,
                                                 expiresDate: nil, notificationType: "DID_RENEW", subtype: nil, occurredAt: 1)],
                                   now: 1_000)
        let client = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(
            connectTimeout: .seconds(2), requestTimeout: .seconds(60)))
        let clock: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }
        let dispatcher = WebhookDispatcher(apps: [bundleId: webhookApp(bundleId, url: receiver.url)], ledger: AsyncSQLLedger(ledger), client: client,
                                           environment: ["HOOK_SECRET": "hook-secret"], logger: .disabled,
                                           identity: .init(id: "gw-a", isStable: false), leaseMillis: 3_000, now: clock)
        let started = ContinuousClock.now
        async let delivered = dispatcher.deliverDue()
        while receiver.heldKeys.isEmpty { try await Task.sleep(for: .milliseconds(20)) }
        // Held past several lease lengths: the renewals keep it gw-a's meanwhile.
        try await Task.sleep(for: .seconds(4))
        XCTAssertEqual(try ledger.leaseDueWebhooks(now: clock(), limit: 1, leaseMillis: 60_000, holder: "gw-b"), [],
                       "a lease renewed while its holder delivers is nobody else's")
        // As if gw-a had stalled past its lease and gw-b had taken the event.
        XCTAssertEqual(try ledger.releaseWebhookLeases(holder: "gw-a", now: clock()), 1)
        XCTAssertEqual(try ledger.leaseDueWebhooks(now: clock(), limit: 1, leaseMillis: 60_000, holder: "gw-b").count, 1)
        let count = try await delivered
        XCTAssertEqual(count, 0)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(15), "aborted, not left to run to the 60 s timeout")
        XCTAssertEqual(receiver.heldKeys, ["k1"])
        XCTAssertEqual(try ledger.outboxDepth(), 1, "not marked delivered")
        XCTAssertEqual(try ledger.renewWebhookLeases(try ledger.dueWebhooks(now: .max, limit: 1).map(\.seq), holder: "gw-b",
                                                     until: clock() + 60_000).count, 1, "still gw-b's: gw-a marked nothing")
        XCTAssertEqual(try ledger.dueWebhooks(now: .max, limit: 1).first?.attempts, 0)
    }
}
