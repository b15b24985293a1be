import Foundation
import IAPCore
import Synchronization
import XCTest
@testable import Ledger

/// Work that must run on one instance at a time: a lease has one unexpired holder, is renewed by
/// it, runs out when it stops renewing, and is given back on release.
final class LeaseTests: LedgerTestCase {
    private let t0: Int64 = 1_700_000_000_000

    func testFreeLeaseIsTakenAndAnotherHolderIsRefusedUntilItExpires() throws {
        let ledger = try openLedger()
        XCTAssertTrue(try ledger.acquireLease("reconciliation", holder: "a", now: t0, ttlMillis: 1_000))
        XCTAssertFalse(try ledger.acquireLease("reconciliation", holder: "b", now: t0 + 999, ttlMillis: 1_000))
        XCTAssertTrue(try ledger.acquireLease("reconciliation", holder: "b", now: t0 + 1_000, ttlMillis: 1_000),
                      "an expired lease (a crashed holder) is free")
        XCTAssertFalse(try ledger.acquireLease("reconciliation", holder: "a", now: t0 + 1_001, ttlMillis: 1_000))
    }

    func testHolderRenewsItsOwnLease() throws {
        let ledger = try openLedger()
        XCTAssertTrue(try ledger.acquireLease("reconciliation", holder: "a", now: t0, ttlMillis: 1_000))
        XCTAssertTrue(try ledger.acquireLease("reconciliation", holder: "a", now: t0 + 900, ttlMillis: 1_000))
        XCTAssertFalse(try ledger.acquireLease("reconciliation", holder: "b", now: t0 + 1_500, ttlMillis: 1_000),
                       "renewed until t0 + 1900")
    }

    func testReleaseFreesTheLeaseOnlyForItsHolder() throws {
        let ledger = try openLedger()
        XCTAssertTrue(try ledger.acquireLease("reconciliation", holder: "a", now: t0, ttlMillis: 60_000))
        try ledger.releaseLease("reconciliation", holder: "b")
        XCTAssertFalse(try ledger.acquireLease("reconciliation", holder: "b", now: t0 + 1, ttlMillis: 60_000))
        try ledger.releaseLease("reconciliation", holder: "a")
        XCTAssertTrue(try ledger.acquireLease("reconciliation", holder: "b", now: t0 + 2, ttlMillis: 60_000))
    }

    func testLeasesOfDifferentNamesAreIndependent() throws {
        let ledger = try openLedger()
        XCTAssertTrue(try ledger.acquireLease("reconciliation", holder: "a", now: t0, ttlMillis: 60_000))
        XCTAssertTrue(try ledger.acquireLease("purge", holder: "b", now: t0, ttlMillis: 60_000))
    }

    func testManyHoldersRacingForAFreeLeaseLeaveExactlyOneHolder() throws {
        let ledger = try openLedger()
        let winners = Mutex(0)
        let t0 = self.t0
        DispatchQueue.concurrentPerform(iterations: 32) { i in
            if (try? ledger.acquireLease("reconciliation", holder: "h\(i)", now: t0, ttlMillis: 60_000)) == true {
                winners.withLock { $0 += 1 }
            }
        }
        XCTAssertEqual(winners.withLock { $0 }, 1)
    }

    func testLeaseWithoutLifetimeOrHolderIsRefused() throws {
        let ledger = try openLedger()
        XCTAssertEqual(errorCode { () throws(VerificationError) in
            _ = try ledger.acquireLease("reconciliation", holder: "a", now: t0, ttlMillis: 0)
        }, .internalError)
        XCTAssertEqual(errorCode { () throws(VerificationError) in
            _ = try ledger.acquireLease("reconciliation", holder: "", now: t0, ttlMillis: 1)
        }, .internalError)
    }
}
