import AppleTrust
import Foundation
import IAPCore
import XCTest
@testable import Ledger

final class AuditTests: LedgerTestCase {
    private func record(evidenceSHA256: String, time: Int64 = 1_700_000_000_000,
                        verdict: AuditVerdict = .granted, errorCode: VerificationError.Code? = nil) -> AuditRecord {
        AuditRecord(time: time, bundleId: "com.example.app", account: "alice", evidenceKind: "signedTransaction",
                    evidenceSHA256: evidenceSHA256, transactionIds: ["1000", "1001"], productIds: ["com.example.pro"],
                    environment: "Production", verdict: verdict, errorCode: errorCode, adapter: "serverAPI",
                    latencyMicros: 1234)
    }

    func testAuditRecordRoundTripsNewestFirst() throws {
        let ledger = try openLedger()
        let granted = record(evidenceSHA256: SHA256Digest.lowercaseHex("first"), time: 1)
        let refused = record(evidenceSHA256: SHA256Digest.lowercaseHex("second"), time: 2, verdict: .refused,
                             errorCode: .invalidSignature)
        try ledger.recordAudit(granted)
        try ledger.recordAudit(refused)
        XCTAssertEqual(try ledger.auditRecords(bundleId: "com.example.app", limit: 10), [refused, granted])
        XCTAssertEqual(try ledger.auditRecords(bundleId: "com.example.app", limit: 1), [refused])
        XCTAssertEqual(try ledger.auditRecords(bundleId: "com.example.other", limit: 10), [])
    }

    func testClaimAppendsItsJudgesAuditRecordInTheSameStep() throws {
        let ledger = try openLedger()
        let granted = record(evidenceSHA256: SHA256Digest.lowercaseHex("evidence"))
        var purchase = claim("alice", [transaction("1000", original: "1000")])
        purchase.judge = RecordingJudge(audit: granted)
        _ = try ledger.claim(purchase)
        XCTAssertEqual(try ledger.auditRecords(bundleId: "com.example.app", limit: 10), [granted])
    }

    /// The judge is handed the entitlements the claim reads back (a newer notification's facts
    /// included), in the same step: here a chain stored expired; its answer is the claim's.
    func testTheJudgeDecidesFromTheEntitlementsTheClaimReadsBack() throws {
        let ledger = try openLedger()
        var purchase = claim("alice", [transaction("1000", original: "1000")],
                             entitlements: [entitlement("alice", original: "1000", state: .expired)])
        let judge = RecordingJudge(audit: record(evidenceSHA256: SHA256Digest.lowercaseHex("evidence"), verdict: .notGranted))
        purchase.judge = judge
        let outcome = try ledger.claim(purchase)
        var handed = try XCTUnwrap(judge.seen.withLock { $0 }.first)
        handed.answer = outcome.answer
        XCTAssertEqual(handed, outcome)
        XCTAssertEqual(outcome.answer?.body, "{}")
        XCTAssertEqual(outcome.entitlements.map(\.state), [.expired])
        XCTAssertEqual(try ledger.auditRecords(bundleId: "com.example.app", limit: 10).map(\.verdict), [.notGranted])
    }

    /// A claim without a judge audits nothing: the record is the judge's to give.
    func testAClaimWithoutAJudgeWritesNoAuditRecord() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000")]))
        XCTAssertEqual(try ledger.auditRecords(bundleId: "com.example.app", limit: 10), [])
    }

    /// Migration 11 widens the verdict CHECK (SQLite: a rebuilt table): rows written before it read
    /// back unchanged with their ids, `notGranted` is accepted after it and not before, and an id
    /// handed out before (even one whose row was deleted since) is never handed out again.
    func testTheNotGrantedMigrationKeepsOldRowsAndTheirIds() throws {
        let beforeIt = Array(releasedMigrations.prefix(10))
        let granted = record(evidenceSHA256: SHA256Digest.lowercaseHex("a"), time: 1)
        let refused = record(evidenceSHA256: SHA256Digest.lowercaseHex("b"), time: 2, verdict: .refused,
                             errorCode: .invalidSignature)
        let notGranted = record(evidenceSHA256: SHA256Digest.lowercaseHex("d"), time: 4, verdict: .notGranted)
        do {
            let old = try openLedger(migrations: beforeIt)
            try old.recordAudit(granted)
            try old.recordAudit(refused)
            try old.recordAudit(record(evidenceSHA256: SHA256Digest.lowercaseHex("c"), time: 3))
            try old.database.withConnection { (connection) throws(VerificationError) in
                _ = try connection.run("DELETE FROM audit_log WHERE time = ?", .integer(3))
            }
            XCTAssertNotNil(errorThrown { () throws(VerificationError) in try old.recordAudit(notGranted) },
                            "the old CHECK refuses notGranted")
        }
        let ledger = try openLedger()
        XCTAssertEqual(try ledger.auditRecords(bundleId: "com.example.app", limit: 10), [refused, granted])
        try ledger.recordAudit(notGranted)
        XCTAssertEqual(try ledger.auditRecords(bundleId: "com.example.app", limit: 10), [notGranted, refused, granted])
        let ids = try ledger.database.withConnection { (connection) throws(VerificationError) in
            try connection.query("SELECT id, time FROM audit_log ORDER BY id") { (row) throws(VerificationError) in
                [try row.requiredInteger(0), try row.requiredInteger(1)]
            }
        }
        XCTAssertEqual(ids.first?[1], 1)
        XCTAssertEqual(ids.dropFirst().first?[1], 2)
        XCTAssertEqual(ids.last?[1], 4)
        XCTAssertGreaterThan(try XCTUnwrap(ids.last?[0]), try XCTUnwrap(ids.dropFirst().first?[0]) + 1,
                             "the deleted row's id is not handed out again")
        // Opened again: nothing to migrate, nothing changed.
        XCTAssertEqual(try openLedger().auditRecords(bundleId: "com.example.app", limit: 10), [notGranted, refused, granted])
    }

    func testRefusedClaimLeavesNoRecordOfAGrant() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claim("bob", [transaction("1000", original: "1000")]))
        var stolen = claim("alice", [transaction("1000", original: "1000")])
        stolen.judge = RecordingJudge(audit: record(evidenceSHA256: SHA256Digest.lowercaseHex("evidence")))
        XCTAssertEqual(errorCode { () throws(VerificationError) in _ = try ledger.claim(stolen) },
                       .transactionBoundToOtherAccount)
        XCTAssertEqual(try ledger.auditRecords(bundleId: "com.example.app", limit: 10), [])
    }

    func testClaimWithAMalformedAuditDigestWritesNothing() throws {
        let ledger = try openLedger()
        var purchase = claim("alice", [transaction("1000", original: "1000")])
        purchase.judge = RecordingJudge(audit: record(evidenceSHA256: "not-a-digest"))
        XCTAssertEqual(errorCode { () throws(VerificationError) in _ = try ledger.claim(purchase) }, .internalError)
        XCTAssertNil(try ledger.owner(bundleId: "com.example.app", originalTransactionId: "1000"))
    }

    func testDatabaseFilesHoldTheEvidenceHashButNeverTheEvidence() throws {
        try skipOnPostgres("reads the database files")
        let evidence = "eyJhbGciOiJFUzI1NiJ9.SECRET-EVIDENCE-PAYLOAD.c2lnbmF0dXJl"
        do {
            let ledger = try openLedger()
            try ledger.recordAudit(record(evidenceSHA256: SHA256Digest.lowercaseHex(evidence)))
        }
        var bytes = Data()
        for suffix in ["", "-wal"] {
            bytes.append((try? Data(contentsOf: URL(fileURLWithPath: databasePath + suffix))) ?? Data())
        }
        XCTAssertNotNil(bytes.range(of: Data(SHA256Digest.lowercaseHex(evidence).utf8)))
        XCTAssertNil(bytes.range(of: Data("SECRET-EVIDENCE-PAYLOAD".utf8)))
    }

    func testAnythingButAHexDigestInTheEvidenceFieldIsRefused() throws {
        let ledger = try openLedger()
        for notADigest in ["eyJhbGciOiJFUzI1NiJ9.payload.signature",
                           SHA256Digest.lowercaseHex("x").uppercased(),
                           String(repeating: "a", count: 65)] {
            XCTAssertEqual(errorCode { () throws(VerificationError) in
                try ledger.recordAudit(record(evidenceSHA256: notADigest))
            }, .internalError)
        }
        XCTAssertEqual(try ledger.auditRecords(bundleId: "com.example.app", limit: 10), [])
    }

    func testSHA256MatchesFIPSVectors() {
        XCTAssertEqual(SHA256Digest.lowercaseHex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(SHA256Digest.lowercaseHex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(SHA256Digest.lowercaseHex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        XCTAssertEqual(SHA256Digest.lowercaseHex(String(repeating: "a", count: 1000)),
                       "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3")
    }

    /// The support history on either engine: by account, by transaction id (an element of the JSON
    /// array exactly, not a prefix of another id nor LIKE's wildcards), and the retention purge.
    func testSupportHistoryFindsAttemptsByAccountAndByExactTransactionIdAndPurgesByAge() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000"), transaction("1001", original: "1000")],
                                   entitlements: [entitlement("alice", original: "1000")]))
        func attempt(_ account: String, _ ids: [String], time: Int64, requestId: String) -> AuditRecord {
            var r = record(evidenceSHA256: SHA256Digest.lowercaseHex(requestId), time: time)
            r.account = account
            r.transactionIds = ids
            r.requestId = requestId
            r.clientVersion = "app/1.0\n\u{7F}"
            r.appleStatus = "21007 0"
            return r
        }
        try ledger.recordAudit(attempt("alice", ["1000", "1001"], time: 10, requestId: "a-granted"))
        try ledger.recordAudit(attempt("bob", ["1001"], time: 20, requestId: "b-stolen"))
        try ledger.recordAudit(attempt("carol", ["10011", "1_0%"], time: 30, requestId: "c-other"))

        let alice = try ledger.supportHistory(bundleId: "com.example.app", subject: .account("alice"), since: 0, limit: 10)
        XCTAssertEqual(alice.attempts.compactMap(\.requestId), ["a-granted"])
        XCTAssertEqual(alice.attempts.first?.clientVersion, "app/1.0??", "control characters are not kept")
        XCTAssertEqual(alice.attempts.first?.appleStatus, "21007 0")
        XCTAssertEqual(alice.chains.map(\.originalTransactionId), ["1000"])
        XCTAssertEqual(alice.chains.first?.grants.map(\.transaction.transactionId), ["1000", "1001"])
        XCTAssertEqual(alice.chains.first?.entitlement?.state, .active)

        let byTransaction = try ledger.supportHistory(bundleId: "com.example.app", subject: .transaction("1001"),
                                                      since: 0, limit: 10)
        XCTAssertEqual(byTransaction.attempts.compactMap(\.requestId), ["b-stolen", "a-granted"])
        XCTAssertEqual(byTransaction.chains.map(\.owner), ["alice"])
        let wildcard = try ledger.supportHistory(bundleId: "com.example.app", subject: .transaction("1_0%"), since: 0, limit: 10)
        XCTAssertEqual(wildcard.attempts.compactMap(\.requestId), ["c-other"])
        XCTAssertEqual(try ledger.supportHistory(bundleId: "com.example.app", subject: .transaction("1_0"), since: 0,
                                                 limit: 10).attempts, [])
        let newest = try ledger.supportHistory(bundleId: "com.example.app", subject: .transaction("1001"), since: 15, limit: 10)
        XCTAssertEqual(newest.attempts.compactMap(\.requestId), ["b-stolen"])

        XCTAssertEqual(try ledger.purgeAudit(olderThan: 25), 2)
        XCTAssertEqual(try ledger.auditRecords(bundleId: "com.example.app", limit: 10).compactMap(\.requestId), ["c-other"])
    }
}
