import AppleTrust
import Foundation
import IAPCore
import Synchronization
import XCTest
@testable import Ledger

final class NonceTests: LedgerTestCase {
    let now: Int64 = 1_700_000_000_000

    func testIssuedNonceIsA128BitBase64URLValueWithItsExpiry() throws {
        let ledger = try openLedger()
        let nonce = try ledger.issueNonce(bundleId: "com.example.app", account: "alice", ttlSeconds: 300, now: now)
        XCTAssertEqual(nonce.value.count, 22)
        XCTAssertTrue(nonce.value.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
        XCTAssertEqual(nonce.expiresAt, now + 300_000)
        let other = try ledger.issueNonce(bundleId: "com.example.app", account: "alice", ttlSeconds: 300, now: now)
        XCTAssertNotEqual(nonce.value, other.value)
    }

    func testNonceIsConsumedOnceThenReportedReused() throws {
        let ledger = try openLedger()
        let nonce = try ledger.issueNonce(bundleId: "com.example.app", account: "alice", ttlSeconds: 300, now: now)
        try ledger.consumeNonce(nonce.value, bundleId: "com.example.app", account: "alice", now: now + 1)
        XCTAssertEqual(errorCode { () throws(VerificationError) in
            try ledger.consumeNonce(nonce.value, bundleId: "com.example.app", account: "alice", now: now + 2)
        }, .nonceReused)
    }

    func testNonceIsStoredOnlyAsItsHash() throws {
        let ledger = try openLedger()
        let nonce = try ledger.issueNonce(bundleId: "com.example.app", account: "alice", ttlSeconds: 300, now: now)
        let stored = try ledger.database.withConnection { (connection) throws(VerificationError) in
            try connection.query("SELECT value_sha256 FROM nonces") { (row) throws(VerificationError) in
                try row.requiredText(0)
            }
        }
        XCTAssertEqual(stored, [SHA256Digest.lowercaseHex(nonce.value)])
    }

    func testExpiredNonceIsInvalidFromItsExpiryOn() throws {
        let ledger = try openLedger()
        let nonce = try ledger.issueNonce(bundleId: "com.example.app", account: "alice", ttlSeconds: 60, now: now)
        XCTAssertEqual(errorCode { () throws(VerificationError) in
            try ledger.consumeNonce(nonce.value, bundleId: "com.example.app", account: "alice", now: nonce.expiresAt)
        }, .nonceInvalid)
        // The refusal did not use it up: one millisecond before expiry it is accepted.
        try ledger.consumeNonce(nonce.value, bundleId: "com.example.app", account: "alice", now: nonce.expiresAt - 1)
    }

    func testNonceOfAnotherAppOrAccountIsInvalidAndStaysUsable() throws {
        let ledger = try openLedger()
        let nonce = try ledger.issueNonce(bundleId: "com.example.app", account: "alice", ttlSeconds: 300, now: now)
        XCTAssertEqual(errorCode { () throws(VerificationError) in
            try ledger.consumeNonce(nonce.value, bundleId: "com.example.other", account: "alice", now: now)
        }, .nonceInvalid)
        XCTAssertEqual(errorCode { () throws(VerificationError) in
            try ledger.consumeNonce(nonce.value, bundleId: "com.example.app", account: "mallory", now: now)
        }, .nonceInvalid)
        try ledger.consumeNonce(nonce.value, bundleId: "com.example.app", account: "alice", now: now)
        // Once used, another account still learns nothing more than "invalid".
        XCTAssertEqual(errorCode { () throws(VerificationError) in
            try ledger.consumeNonce(nonce.value, bundleId: "com.example.app", account: "mallory", now: now)
        }, .nonceInvalid)
    }

    func testUnknownEmptyAndOversizedNoncesAreInvalid() throws {
        let ledger = try openLedger()
        for value in ["AAAAAAAAAAAAAAAAAAAAAA", "", String(repeating: "A", count: 10_000)] {
            XCTAssertEqual(errorCode { () throws(VerificationError) in
                try ledger.consumeNonce(value, bundleId: "com.example.app", account: "alice", now: now)
            }, .nonceInvalid)
        }
    }

    func testNonceLifetimeOutsideOneSecondToOneDayIsRefused() throws {
        let ledger = try openLedger()
        for ttl in [0, -5, 86_401, Int.max] {
            XCTAssertEqual(errorCode { () throws(VerificationError) in
                _ = try ledger.issueNonce(bundleId: "com.example.app", account: "alice", ttlSeconds: ttl, now: now)
            }, .invalidConfiguration)
        }
    }

    func testConcurrentConsumersOnTwoConnectionsSucceedExactlyOnce() throws {
        let first = try openLedger()
        let second = try openLedger()
        let nonce = try first.issueNonce(bundleId: "com.example.app", account: "alice", ttlSeconds: 300, now: now)
        let outcomes = Mutex<[VerificationError.Code?]>([])
        let now = self.now
        DispatchQueue.concurrentPerform(iterations: 20) { index in
            let ledger = index.isMultiple(of: 2) ? first : second
            var code: VerificationError.Code?
            do throws(VerificationError) {
                try ledger.consumeNonce(nonce.value, bundleId: "com.example.app", account: "alice", now: now)
            } catch {
                code = error.code
            }
            outcomes.withLock { $0.append(code) }
        }
        let codes = outcomes.withLock { $0 }
        XCTAssertEqual(codes.count, 20)
        XCTAssertEqual(codes.filter { $0 == nil }.count, 1)
        XCTAssertEqual(codes.filter { $0 == .nonceReused }.count, 19)
    }
}
