import Foundation
import IAPCore
import XCTest
@testable import Ledger

/// The finish outbox on both engines: written by the claim only, once per transaction, leased,
/// never handed out again once finished, dropped when its chain was refunded.
final class FinishOutboxTests: LedgerTestCase {
    /// The claims' time (`claim`'s default): what the ledger stores as their grant and due time.
    private let t0: Int64 = 1_700_000_000_000

    private func finishing(_ account: String, _ transactions: [CanonicalTransaction],
                           entitlements: [Entitlement] = []) -> PurchaseClaim {
        var purchase = claim(account, transactions, entitlements: entitlements)
        // As the gateway asks: every transaction but the refunded and revoked ones.
        purchase.finishIfNewlyGranted = Set(transactions.filter { $0.revocationDate == nil }.map(\.transactionId))
        return purchase
    }

    private func production(_ id: String, original: String, revocationDate: Int64? = nil) -> CanonicalTransaction {
        var t = transaction(id, original: original, revocationDate: revocationDate)
        t.environment = .production
        return t
    }

    func testClaimQueuesEachNewUnrevokedGrantOnceAndALeaseHidesIt() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(finishing("alice", [production("1000", original: "1000"),
                                                 production("1001", original: "1000", revocationDate: 5)]))
        _ = try ledger.claim(finishing("alice", [production("1000", original: "1000")]))
        var xcode = transaction("3000", original: "3000")
        xcode.environment = .xcode
        _ = try ledger.claim(finishing("alice", [xcode]))
        _ = try ledger.claim(claim("alice", [production("4000", original: "4000")]))
        XCTAssertThrowsError(try ledger.claim(finishing("bob", [production("1000", original: "1000"),
                                                                 production("5000", original: "1000")])))

        let leased = try ledger.leaseDueFinishes(now: t0 + 2_000, limit: 10, leaseMillis: 60_000, holder: "gw-a")
        let whileLeased = try ledger.leaseDueFinishes(now: t0 + 2_001, limit: 10, leaseMillis: 60_000, holder: "gw-a")

        XCTAssertEqual(leased, [PendingFinish(bundleId: "com.example.app", transactionId: "1000", environment: .production,
                                              attempts: 0)])
        XCTAssertEqual(whileLeased, [])
        XCTAssertEqual(try ledger.finishEntries(bundleId: "com.example.app").map(\.transactionId), ["1000"])
    }

    func testFinishedIsNeverLeasedAgainAndARefundedChainIsDropped() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(finishing("alice", [production("1000", original: "1000")],
                                       entitlements: [entitlement("alice", original: "1000")]))
        _ = try ledger.claim(finishing("alice", [production("2000", original: "2000")],
                                       entitlements: [entitlement("alice", original: "2000")]))
        let first = try ledger.leaseDueFinishes(now: t0 + 2_000, limit: 1, leaseMillis: 1, holder: "gw-a")
        XCTAssertEqual(first.map(\.transactionId), ["1000"])
        XCTAssertTrue(try ledger.markFinished(bundleId: "com.example.app", transactionId: "1000", at: t0 + 2_000))
        XCTAssertFalse(try ledger.markFinished(bundleId: "com.example.app", transactionId: "1000", at: t0 + 2_001))
        // A later fact refunds chain 2000 before its finish is sent.
        var refunded = finishing("alice", [], entitlements: [entitlement("alice", original: "2000", state: .refunded)])
        refunded.now = t0 + 3_000
        _ = try ledger.claim(refunded)

        let later = try ledger.leaseDueFinishes(now: t0 + 4_000, limit: 10, leaseMillis: 1, holder: "gw-a")

        XCTAssertEqual(later, [])
        let entries = try ledger.finishEntries(bundleId: "com.example.app")
        XCTAssertEqual(entries.map(\.transactionId), ["1000", "2000"])
        XCTAssertEqual(entries.map { $0.finishedAt != nil }, [true, false])
        XCTAssertEqual(entries.map { $0.droppedAt != nil }, [false, true])
        XCTAssertEqual(entries.last?.lastErrorCode, "TRANSACTION_REVOKED")
    }

    func testOnlyTheHolderRenewsALeaseAndReleasingMakesItsRowsDueAtOnce() throws {
        let ledger = try openLedger()
        for id in ["1000", "2000"] {
            _ = try ledger.claim(finishing("alice", [production(id, original: id)], entitlements: [entitlement("alice", original: id)]))
        }
        let first = FinishKey(bundleId: "com.example.app", transactionId: "1000")
        let second = FinishKey(bundleId: "com.example.app", transactionId: "2000")
        XCTAssertEqual(try ledger.leaseDueFinishes(now: t0 + 2_000, limit: 1, leaseMillis: 60_000, holder: "gw-a").map(\.key), [first])
        XCTAssertEqual(try ledger.leaseDueFinishes(now: t0 + 2_000, limit: 1, leaseMillis: 60_000, holder: "gw-b").map(\.key), [second])

        let renewedByA = try ledger.renewFinishLeases([first, second], holder: "gw-a", until: t0 + 100_000)
        let released = try ledger.releaseFinishLeases(holder: "gw-a", now: t0 + 3_000)
        let takenOver = try ledger.leaseDueFinishes(now: t0 + 3_000, limit: 10, leaseMillis: 60_000, holder: "gw-c")
        let renewedByAAfterTheTakeover = try ledger.renewFinishLeases([first], holder: "gw-a", until: t0 + 100_000)
        XCTAssertTrue(try ledger.markFinished(bundleId: "com.example.app", transactionId: "1000", at: t0 + 3_001))
        let renewedOnceFinished = try ledger.renewFinishLeases([first], holder: "gw-c", until: t0 + 100_000)
        let releasedOnceFinished = try ledger.releaseFinishLeases(holder: "gw-c", now: t0 + 3_002)

        XCTAssertEqual(renewedByA, [first], "another holder's row is not renewed")
        XCTAssertEqual(released, 1)
        XCTAssertEqual(takenOver.map(\.key), [first], "the released row is due at once; gw-b's is still leased")
        XCTAssertEqual(renewedByAAfterTheTakeover, [], "a row taken over is no longer its first holder's")
        XCTAssertEqual(renewedOnceFinished, [])
        XCTAssertEqual(releasedOnceFinished, 0)
        XCTAssertEqual(try ledger.finishEntries(bundleId: "com.example.app").map(\.nextAttemptAt), [t0 + 3_000 + 60_000, t0 + 2_000 + 60_000])
    }
}
