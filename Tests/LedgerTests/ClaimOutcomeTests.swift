import Foundation
import IAPCore
import XCTest
@testable import Ledger

/// What a claim reports and what it leaves to its judge, on whichever engine the suite runs: the
/// chains a newer stored fact decides, and a judge's refusal rolling back the whole claim.
final class ClaimOutcomeTests: InboxTestCase {
    /// A claim of chain 1000 whose facts Apple stated at `factTime`.
    private func claimOf(_ account: String, factTime: Int64, judge: RecordingJudge? = nil, key: IdempotentWrite? = nil)
        -> PurchaseClaim {
        var bought = transaction("1000", original: "1000", signedDate: factTime)
        bought.environment = .production
        var purchase = claim(account, [bought], entitlements: [entitlement(account, original: "1000")], now: t0 + 2 * day)
        purchase.factTimes = ["1000": factTime]
        purchase.judge = judge
        purchase.idempotency = key
        return purchase
    }

    func testAChainRevokedByAFactNewerThanTheClaimsIsReportedAndOnlyThen() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claimOf("alice", factTime: t0))
        XCTAssertTrue(try ledger.enqueue(entry("revoke", signedDate: t0 + day, type: "REVOKE")))
        var applied: [String] = []
        try drain(ledger, applied: &applied)
        XCTAssertEqual(applied, ["revoke"])

        let older = try ledger.claim(claimOf("alice", factTime: t0 + day - 1))
        let newer = try ledger.claim(claimOf("alice", factTime: t0 + day + 1))

        XCTAssertEqual(older.newerFacts, ["1000": .revoked])
        XCTAssertEqual(older.entitlements.map(\.state), [.revoked], "the newer fact decides the stored entitlement")
        XCTAssertEqual(newer.newerFacts, [:])
        XCTAssertEqual(newer.entitlements.map(\.state), [.active])
    }

    func testAJudgesRefusalWritesNothingOfTheClaim() throws {
        let ledger = try openLedger()
        let key = IdempotentWrite(key: "k1", requestSHA256: String(repeating: "a", count: 64), expiresAt: t0 + 3 * day)
        let refusing = RecordingJudge(audit: auditRecord("a"), refusal: VerificationError(.transactionRevoked, "revoked"))
        var purchase = claimOf("alice", factTime: t0, judge: refusing, key: key)
        purchase.finishIfNewlyGranted = ["1000"]

        let error = errorThrown { () throws(VerificationError) in _ = try ledger.claim(purchase) }

        XCTAssertEqual(error?.code, .transactionRevoked)
        XCTAssertEqual(refusing.seen.withLock { $0.map(\.newlyGranted) }, [["1000"]], "judged after the grant it rolls back")
        XCTAssertNil(try ledger.owner(bundleId: app, originalTransactionId: "1000"))
        XCTAssertEqual(try ledger.entitlements(bundleId: app, account: "alice"), [])
        XCTAssertEqual(try ledger.auditRecords(bundleId: app, limit: 10), [])
        XCTAssertNil(try ledger.idempotentAnswer(bundleId: app, key: "k1", now: t0 + 2 * day))
        XCTAssertEqual(try ledger.finishEntries(bundleId: app), [])

        let answering = RecordingJudge(audit: auditRecord("b", verdict: .granted))
        let granted = try ledger.claim(claimOf("alice", factTime: t0, judge: answering, key: key))
        XCTAssertEqual(granted.newlyGranted, ["1000"], "the refused claim granted nothing")
        XCTAssertEqual(try ledger.auditRecords(bundleId: app, limit: 10), [auditRecord("b", verdict: .granted)])
    }
}
