import Foundation
import IAPCore
import Synchronization
import XCTest
@testable import Ledger

final class ConcurrentClaimTests: LedgerTestCase {
    /// Each of `accounts` claims the same purchase at once, through the ledger chosen for it.
    private func raceClaims(accounts: [String], ledgerFor: @Sendable (Int) -> SQLLedger)
        -> (winners: [String], codes: [VerificationError.Code]) {
        let winners = Mutex<[String]>([])
        let codes = Mutex<[VerificationError.Code]>([])
        let purchase = transaction("5000", original: "5000")
        DispatchQueue.concurrentPerform(iterations: accounts.count) { index in
            let account = accounts[index]
            let claim = PurchaseClaim(bundleId: "com.example.app", account: account, transactions: [purchase],
                                      entitlements: [], now: 1_700_000_000_000)
            do throws(VerificationError) {
                let outcome = try ledgerFor(index).claim(claim)
                if outcome.newlyGranted == ["5000"] { winners.withLock { $0.append(account) } }
            } catch {
                codes.withLock { $0.append(error.code) }
            }
        }
        return (winners.withLock { $0 }, codes.withLock { $0 })
    }

    func testFiftyAccountsRacingForOnePurchaseLeaveExactlyOneOwner() throws {
        let ledger = try openLedger()
        let accounts = (0..<50).map { "account-\($0)" }
        let (winners, codes) = raceClaims(accounts: accounts) { _ in ledger }
        XCTAssertEqual(winners.count, 1)
        XCTAssertEqual(codes, Array(repeating: .transactionBoundToOtherAccount, count: 49))
        XCTAssertEqual(try ledger.owner(bundleId: "com.example.app", originalTransactionId: "5000"), winners.first)
    }

    func testSecondConnectionSeesBindingMadeByTheFirst() throws {
        let first = try openLedger()
        let second = try openLedger()
        _ = try first.claim(claim("alice", [transaction("1000", original: "1000")]))
        XCTAssertEqual(try second.owner(bundleId: "com.example.app", originalTransactionId: "1000"), "alice")
        XCTAssertEqual(errorCode { () throws(VerificationError) in
            _ = try second.claim(claim("mallory", [transaction("1000", original: "1000")]))
        }, .transactionBoundToOtherAccount)
    }

    func testRacingClaimsAcrossTwoConnectionsLeaveExactlyOneOwner() throws {
        let first = try openLedger()
        let second = try openLedger()
        let accounts = (0..<50).map { "account-\($0)" }
        let (winners, codes) = raceClaims(accounts: accounts) { $0.isMultiple(of: 2) ? first : second }
        XCTAssertEqual(winners.count, 1)
        XCTAssertEqual(codes, Array(repeating: .transactionBoundToOtherAccount, count: 49))
        XCTAssertEqual(try first.owner(bundleId: "com.example.app", originalTransactionId: "5000"), winners.first)
        XCTAssertEqual(try second.owner(bundleId: "com.example.app", originalTransactionId: "5000"), winners.first)
    }
}
