import Foundation
import Gateway
import IAPCore
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
        try ledger.enqueueWebhooks(["k1", "k2"].map { key in
            WebhookEvent(kind: .entitlementChanged, idempotencyKey: key, bundleId: bundleId, originalTransactionId: nil,
                         transactionId: nil, productId: "p", state: .active, expiresDate: nil,
                         notificationType: "DID_RENEW", subtype: nil, occurredAt: 1)
        }, now: 1_000)
        let client = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(
            connectTimeout: .seconds(2), requestTimeout: .seconds(2)))
        // Each delivery seems to take a minute (a slow receiver, a stalled database checkout): after the
        // first, the batch's 10 s lease has long run out (its renewal, every 3.3 s, has not come yet).
        let dispatcher = WebhookDispatcher(apps: [bundleId: app(webhookURL: receiver.url)], ledger: ledger, client: client,
                                           environment: ["HOOK_SECRET": "hook-secret"], logger: .disabled,
                                           leaseMillis: 10_000,
                                           now: { 1_000 + Int64(receiver.deliveries.count) * 60_000 })
        let delivered = try await dispatcher.deliverDue(limit: 2)
        XCTAssertEqual(delivered, 1)
        XCTAssertEqual(receiver.deliveries.map(\.idempotencyKey), ["k1"])
        XCTAssertEqual(try ledger.outboxDepth(), 1, "the other event waits for the next lease, not lost")
        let later = try await dispatcher.deliverDue(limit: 2)
        XCTAssertEqual(later, 1)
        XCTAssertEqual(receiver.deliveries.map(\.idempotencyKey), ["k1", "k2"])
    }

    private func app(webhookURL: String) -> AppPolicy {
        AppPolicy(bundleId: bundleId, allowedEnvironments: [.production], trustRoots: .init(jws: [], receipts: []),
                  productCatalog: [:], routing: .init(receipt: .legacy, transactionId: .serverAPI,
                                                      signedTransaction: .serverAPI, cutoverSampleRate: 0),
                  noncePolicy: .init(requiredForReceipts: false, ttlSeconds: 60), familySharingPolicy: .allow,
                  gracePeriodPolicy: .init(grantDuringGracePeriod: true, grantDuringBillingRetry: false),
                  onlineChecks: false, localOnlyJWS: false, apiKey: .sha256(String(repeating: "0", count: 64)),
                  webhook: .init(url: webhookURL, secret: SecretReference(.environmentVariable("HOOK_SECRET"))))
    }
}
