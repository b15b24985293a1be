import Adapters
import AppStoreSimulator
import Foundation
@testable import Gateway
import IAPConfig
import IAPCore
import Ledger
import TestSupport
import XCTest

/// Finish Transaction (API 1.20) from the finish outbox: over real HTTP to the simulator, after the
/// grant is durable, at least once, Retry-After honoured, never for a refunded or refused purchase,
/// never twice after Apple's success.
final class FinishTransactionTests: XCTestCase {
    /// A signed transaction the gateway trusts locally, so the verify itself asks Apple nothing and
    /// the only Server API call is the finisher's.
    private func start() async throws -> GatewayE2E {
        try await GatewayE2E.start(self) {
            $0.finishTransactions = true
            $0.localOnlyJWS = true
            $0.upstreamBudgetSeconds = 5
        }
    }

    private static func millis() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    private func eventually(_ what: String, _ condition: () throws -> Bool) async throws {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if try condition() { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        XCTFail("timed out waiting until \(what)")
    }

    /// The finisher as the test drives it: the gateway's own apps, ledger and Server API client,
    /// with a clock `aheadMillis` in the future.
    private func finisher(_ gw: GatewayE2E, aheadMillis: Int64) throws -> TransactionFinisher {
        let parts = gw.harness.parts
        let ledger = try XCTUnwrap(parts.ledger as? any FinishLedger)
        return TransactionFinisher(apps: parts.apps, ledger: ledger,
                                   finishing: parts.adapters.capability((any TransactionFinishing).self),
                                   now: { Self.millis() + aheadMillis })
    }

    /// A purchase bought by `owner` and verified (signed transaction) for `account`, whose first
    /// Finish Transaction Apple answers 429 with Retry-After 30 (longer than the budget): the
    /// background finisher records the attempt and waits Apple's 30 s, not its own 1 s backoff.
    private func grantWithFirstFinishRateLimited(_ gw: GatewayE2E, owner: String, account: String)
        async throws -> (purchase: SimulatedPurchase, jws: String, answer: GatewayAnswer) {
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: owner)
        let jws = try gw.simulator.signedTransaction(transactionId: purchase.transactionId)
        gw.simulator.faults.rateLimitNext(1, retryAfterSeconds: 30)
        let before = Self.millis()
        let answer = try await gw.verifySigned(jws, account: account)
        XCTAssertEqual(answer.status, 200, answer.text)
        try await firstAttemptRateLimited(gw, transactionId: purchase.transactionId, since: before)
        return (purchase, jws, answer)
    }

    private func firstAttemptRateLimited(_ gw: GatewayE2E, transactionId: String, since: Int64) async throws {
        try await eventually("the first finish attempt is recorded") {
            try gw.harness.parts.storedLedger.finishEntries(bundleId: gw.bundleId).first?.attempts == 1
        }
        let entry = try XCTUnwrap(try gw.harness.parts.storedLedger.finishEntries(bundleId: gw.bundleId).first)
        XCTAssertEqual(entry.transactionId, transactionId)
        XCTAssertEqual(entry.lastErrorCode, "RATE_LIMITED")
        XCTAssertGreaterThanOrEqual(entry.nextAttemptAt, since + 30_000)
        XCTAssertNil(entry.finishedAt)
        XCTAssertEqual(gw.simulator.finishTransactionCalls, [])
    }

    func testNewlyGrantedPurchaseIsFinishedOnceAfterApplesRetryAfter() async throws {
        let gw = try await start()
        let (purchase, jws, granted) = try await grantWithFirstFinishRateLimited(gw, owner: "device-fay", account: "fay")
        XCTAssertEqual(granted.json["newlyGranted"], .array([.string(purchase.transactionId)]))

        let tooEarly = try await finisher(gw, aheadMillis: 20_000).finishDue()
        let afterRetryAfter = try await finisher(gw, aheadMillis: 31_000).finishDue()
        let again = try await finisher(gw, aheadMillis: 3_600_000).finishDue()
        let reclaimed = try await gw.verifySigned(jws, account: "fay")
        let afterReclaim = try await finisher(gw, aheadMillis: 7_200_000).finishDue()

        XCTAssertEqual(tooEarly, 0)
        XCTAssertEqual(afterRetryAfter, 1)
        XCTAssertEqual(again, 0)
        XCTAssertEqual(reclaimed.json["alreadyGranted"], .array([.string(purchase.transactionId)]))
        XCTAssertEqual(afterReclaim, 0)
        XCTAssertEqual(gw.simulator.finishTransactionCalls.map(\.transactionId), [purchase.transactionId])
        XCTAssertEqual(gw.simulator.finishTransactionCalls.map(\.environment), [.production])
        let entries = try gw.harness.parts.storedLedger.finishEntries(bundleId: gw.bundleId)
        XCTAssertEqual(entries.count, 1)
        XCTAssertNotNil(entries.first?.finishedAt)
        XCTAssertEqual(entries.first?.attempts, 2)
    }

    func testRefundedOrRefusedPurchaseIsNeverFinished() async throws {
        let gw = try await start()
        // Granted, then refunded before the finish could be sent.
        let granted = try await grantWithFirstFinishRateLimited(gw, owner: "device-gus", account: "gus").purchase
        let refund = try gw.simulator.refund(transactionId: granted.transactionId)
        _ = try await gw.simulator.sendNotification(type: "REFUND", purchase: refund, to: gw.harness.notificationURL)
        try await gw.waitUntilInboxIsDrained()
        // Refunded before it was ever presented: refused, so never granted nor queued.
        let refusedPurchase = try gw.buy(GatewayE2E.monthly, owner: "device-gus")
        _ = try gw.simulator.refund(transactionId: refusedPurchase.transactionId)
        let refused = try await gw.verifySigned(try gw.simulator.signedTransaction(transactionId: refusedPurchase.transactionId),
                                                account: "gus")

        let finished = try await finisher(gw, aheadMillis: 31_000).finishDue()

        XCTAssertEqual(refused.status, 422, refused.text)
        XCTAssertEqual(refused.errorCode, "TRANSACTION_REVOKED")
        XCTAssertEqual(finished, 0)
        XCTAssertEqual(gw.simulator.finishTransactionCalls, [])
        let entries = try gw.harness.parts.storedLedger.finishEntries(bundleId: gw.bundleId)
        XCTAssertEqual(entries.map(\.transactionId), [granted.transactionId])
        XCTAssertNotNil(entries.first?.droppedAt)
        XCTAssertEqual(entries.first?.lastErrorCode, "TRANSACTION_REVOKED")
    }

    func testWithoutThePolicyNothingIsQueuedAndStoreKitFinishes() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-hal")

        let answer = try await gw.verifyTransactionId(purchase.transactionId, account: "hal")
        var enabled = gw.harness.parts.apps
        enabled[gw.bundleId]?.finishTransactions = true
        let parts = gw.harness.parts
        let sent = try await TransactionFinisher(apps: enabled, ledger: try XCTUnwrap(parts.ledger as? any FinishLedger),
                                                 finishing: parts.adapters.capability((any TransactionFinishing).self),
                                                 now: { Self.millis() }).finishDue()

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(sent, 0)
        XCTAssertEqual(try parts.storedLedger.finishEntries(bundleId: gw.bundleId), [])
        XCTAssertEqual(gw.simulator.finishTransactionCalls, [])
    }

    func testAppFileReadsFinishTransactionsAndDefaultsToOff() async throws {
        let gw = try await GatewayE2E.start(self)
        let appFile = gw.harness.directory.appendingPathComponent("apps/\(gw.bundleId).xml")
        let original = try String(contentsOf: appFile, encoding: .utf8)
        func load(_ value: String?) throws -> AppPolicy? {
            let line = value.map { "<finishTransactions type=\"bool\">\($0)</finishTransactions>" } ?? ""
            try original.replacingOccurrences(of: #"<finishTransactions type="bool">false</finishTransactions>"#, with: line)
                .write(to: appFile, atomically: true, encoding: .utf8)
            return try ConfigLoader.loadAll(configDirectory: gw.harness.directory).apps[gw.bundleId]
        }

        XCTAssertEqual(try load("true")?.finishTransactions, true)
        XCTAssertEqual(try load(nil)?.finishTransactions, false)
        XCTAssertThrowsError(try load("yes")) { XCTAssertEqual(($0 as? VerificationError)?.code, .invalidConfiguration) }
    }
}
