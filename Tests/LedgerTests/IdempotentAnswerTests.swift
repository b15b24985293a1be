import AppleTrust
import Foundation
import IAPCore
import XCTest
@testable import Ledger

/// Answers stored under `Idempotency-Key`s, on whichever engine the suite runs: written in the
/// claim's own transaction, per app, until they expire; a second answer for a live key rolls back
/// the work it came with.
final class IdempotentAnswerTests: LedgerTestCase {
    private let now: Int64 = 1_700_000_000_000
    private func key(_ key: String, request: String = "a", hours: Int64 = 24) -> IdempotentWrite {
        IdempotentWrite(key: key, requestSHA256: SHA256Digest.lowercaseHex(request), expiresAt: now + hours * 3_600_000)
    }

    private func keyedClaim(_ account: String, _ id: String, _ write: IdempotentWrite, bundleId: String = "com.example.app") -> PurchaseClaim {
        var purchase = claim(account, [transaction(id, original: id)], entitlements: [entitlement(account, original: id)],
                             bundleId: bundleId, now: now)
        purchase.idempotency = write
        purchase.judge = RecordingJudge(audit: auditRecord("a")) { claimed in #"{"newlyGranted":\#(claimed.newlyGranted)}"# }
        return purchase
    }

    func testAClaimStoresItsAnswerUnderItsKeyInTheSameStep() throws {
        let ledger = try openLedger()
        let outcome = try ledger.claim(keyedClaim("alice", "1000", key("k1")))
        XCTAssertEqual(outcome.newlyGranted, ["1000"])
        let stored = try XCTUnwrap(try ledger.idempotentAnswer(bundleId: "com.example.app", key: "k1", now: now + 1))
        XCTAssertEqual(stored, StoredAnswer(requestSHA256: SHA256Digest.lowercaseHex("a"), status: 200, body: #"{"newlyGranted":["1000"]}"#))
        XCTAssertEqual(stored.body, outcome.answer?.body)
        // Keys are per app.
        XCTAssertNil(try ledger.idempotentAnswer(bundleId: "com.example.other", key: "k1", now: now + 1))
    }

    func testASecondAnswerForALiveKeyRollsBackTheWholeClaim() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(keyedClaim("alice", "1000", key("k1")))
        let refused = errorThrown { () throws(VerificationError) in _ = try ledger.claim(keyedClaim("alice", "2000", key("k1"))) }
        XCTAssertEqual(refused, IdempotentWrite.answeredElsewhere)
        XCTAssertNil(try ledger.owner(bundleId: "com.example.app", originalTransactionId: "2000"), "nothing of the claim was written")
        // The same key in another app is another key.
        XCTAssertEqual(try ledger.claim(keyedClaim("bob", "3000", key("k1"), bundleId: "com.example.other")).newlyGranted, ["3000"])
    }

    func testAnExpiredAnswerIsNotReplayedGivesWayToANewOneAndIsPurged() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(keyedClaim("alice", "1000", key("k1", hours: 24)))
        let later = now + 24 * 3_600_000
        XCTAssertNil(try ledger.idempotentAnswer(bundleId: "com.example.app", key: "k1", now: later), "expired at its time")
        var again = keyedClaim("alice", "2000", IdempotentWrite(key: "k1", requestSHA256: SHA256Digest.lowercaseHex("b"),
                                                                 expiresAt: later + 3_600_000))
        again.now = later
        XCTAssertEqual(try ledger.claim(again).newlyGranted, ["2000"])
        XCTAssertEqual(try ledger.idempotentAnswer(bundleId: "com.example.app", key: "k1", now: later + 1)?.requestSHA256,
                       SHA256Digest.lowercaseHex("b"))
        XCTAssertEqual(try ledger.purgeIdempotentAnswers(expiredBy: later + 3_600_000), 1)
        XCTAssertNil(try ledger.idempotentAnswer(bundleId: "com.example.app", key: "k1", now: later + 1))
    }

    func testANonceSpentByAKeyedRequestMayBeSpentAgainByThatRequestOnly() throws {
        let ledger = try openLedger()
        let nonce = try ledger.issueNonce(bundleId: "com.example.app", account: "alice", ttlSeconds: 60, now: now)
        let request = key("k1").requestIdentity
        try ledger.consumeNonce(nonce.value, bundleId: "com.example.app", account: "alice", now: now + 1, by: request)
        // Its retry (the first attempt failed after spending it, before its claim).
        try ledger.consumeNonce(nonce.value, bundleId: "com.example.app", account: "alice", now: now + 2, by: request)
        for other in [nil, key("k2").requestIdentity, key("k1", request: "another body").requestIdentity] {
            let refused = errorThrown { () throws(VerificationError) in
                try ledger.consumeNonce(nonce.value, bundleId: "com.example.app", account: "alice", now: now + 3, by: other)
            }
            XCTAssertEqual(refused?.code, .nonceReused)
        }
        // An unkeyed spend is once, for everyone.
        let plain = try ledger.issueNonce(bundleId: "com.example.app", account: "alice", ttlSeconds: 60, now: now)
        try ledger.consumeNonce(plain.value, bundleId: "com.example.app", account: "alice", now: now + 1)
        let refused = errorThrown { () throws(VerificationError) in
            try ledger.consumeNonce(plain.value, bundleId: "com.example.app", account: "alice", now: now + 2, by: request)
        }
        XCTAssertEqual(refused?.code, .nonceReused)
    }
}
