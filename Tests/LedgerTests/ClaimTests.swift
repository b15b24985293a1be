import Foundation
import IAPCore
import XCTest
@testable import Ledger

final class ClaimTests: LedgerTestCase {
    func testFirstClaimBindsThePurchaseAndGrantsEachTransaction() throws {
        let ledger = try openLedger()
        let outcome = try ledger.claim(claim("alice", [transaction("1000", original: "1000"),
                                                        transaction("1001", original: "1000")],
                                             entitlements: [entitlement("alice", original: "1000")]))
        XCTAssertEqual(outcome, ClaimOutcome(newlyGranted: ["1000", "1001"], alreadyGranted: [],
                                             entitlements: [entitlement("alice", original: "1000")]))
        XCTAssertEqual(try ledger.owner(bundleId: "com.example.app", originalTransactionId: "1000"), "alice")
        XCTAssertEqual(try ledger.transactions(bundleId: "com.example.app", originalTransactionId: "1000")
            .map(\.transactionId), ["1000", "1001"])
        XCTAssertEqual(try ledger.entitlements(bundleId: "com.example.app", account: "alice"),
                       [entitlement("alice", original: "1000")])
    }

    func testTransactionWithoutOriginalIdIsOwnedUnderItsOwnId() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice", [transaction("2000")]))
        XCTAssertEqual(try ledger.owner(bundleId: "com.example.app", originalTransactionId: "2000"), "alice")
    }

    func testReclaimBySameAccountReportsAlreadyGranted() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000")]))
        let again = try ledger.claim(claim("alice", [transaction("1000", original: "1000"),
                                                      transaction("1001", original: "1000"),
                                                      transaction("1001", original: "1000")]))
        XCTAssertEqual(again, ClaimOutcome(newlyGranted: ["1001"], alreadyGranted: ["1000"]))
    }

    func testSecondAccountIsRefusedWithoutLearningTheOwner() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice@example.com", [transaction("1000", original: "1000")]))
        let error = errorThrown { () throws(VerificationError) in
            _ = try ledger.claim(claim("mallory", [transaction("1000", original: "1000")]))
        }
        XCTAssertEqual(error?.code, .transactionBoundToOtherAccount)
        XCTAssertFalse(error?.message.contains("alice") ?? true)
        XCTAssertEqual(try ledger.owner(bundleId: "com.example.app", originalTransactionId: "1000"), "alice@example.com")
    }

    func testRenewalOfAnotherAccountsPurchaseIsRefused() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000")]))
        XCTAssertEqual(errorCode { () throws(VerificationError) in
            _ = try ledger.claim(claim("mallory", [transaction("1001", original: "1000")]))
        }, .transactionBoundToOtherAccount)
        XCTAssertEqual(try ledger.owner(bundleId: "com.example.app", originalTransactionId: "1000"), "alice")
        XCTAssertEqual(try ledger.transactions(bundleId: "com.example.app", originalTransactionId: "1000")
            .map(\.transactionId), ["1000"])
    }

    func testConflictOnSecondTransactionLeavesNothingOfTheFirst() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice", [transaction("2000", original: "2000")]))
        XCTAssertEqual(errorCode { () throws(VerificationError) in
            _ = try ledger.claim(claim("mallory", [transaction("1000", original: "1000"),
                                                   transaction("2000", original: "2000")],
                                       entitlements: [entitlement("mallory", original: "1000")]))
        }, .transactionBoundToOtherAccount)
        XCTAssertNil(try ledger.owner(bundleId: "com.example.app", originalTransactionId: "1000"))
        XCTAssertEqual(try ledger.transactions(bundleId: "com.example.app", originalTransactionId: "1000"), [])
        XCTAssertEqual(try ledger.entitlements(bundleId: "com.example.app", account: "mallory"), [])
        // The rolled-back claim granted nothing, so the purchase is still free for its real buyer.
        let outcome = try ledger.claim(claim("bob", [transaction("1000", original: "1000")]))
        XCTAssertEqual(outcome.newlyGranted, ["1000"])
    }

    func testOwnershipIsPerApp() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000")]))
        let other = try ledger.claim(claim("bob", [transaction("1000", original: "1000")], bundleId: "com.example.other"))
        XCTAssertEqual(other.newlyGranted, ["1000"])
        XCTAssertEqual(try ledger.owner(bundleId: "com.example.other", originalTransactionId: "1000"), "bob")
    }

    func testTransactionReachedUnderAnotherOriginalIdStaysWithItsAccount() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice", [transaction("1000")]))
        XCTAssertEqual(errorCode { () throws(VerificationError) in
            _ = try ledger.claim(claim("mallory", [transaction("1000", original: "999")]))
        }, .transactionBoundToOtherAccount)
        XCTAssertNil(try ledger.owner(bundleId: "com.example.app", originalTransactionId: "999"))
    }

    func testEntitlementForAPurchaseOfAnotherAccountIsRefused() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000")]))
        XCTAssertEqual(errorCode { () throws(VerificationError) in
            _ = try ledger.claim(claim("mallory", [transaction("3000", original: "3000")],
                                       entitlements: [entitlement("mallory", original: "1000")]))
        }, .transactionBoundToOtherAccount)
        XCTAssertNil(try ledger.owner(bundleId: "com.example.app", originalTransactionId: "3000"))
    }

    func testEntitlementForAnotherAccountOrAnUnboundPurchaseIsRefusedAndRolledBack() throws {
        let ledger = try openLedger()
        for wrong in [entitlement("bob", original: "1000"), entitlement("alice", original: "never-bound")] {
            XCTAssertEqual(errorCode { () throws(VerificationError) in
                _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000")], entitlements: [wrong]))
            }, .internalError)
        }
        XCTAssertNil(try ledger.owner(bundleId: "com.example.app", originalTransactionId: "1000"))
    }

    func testEntitlementsAreUpsertedPerPurchase() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000")],
                                   entitlements: [entitlement("alice", original: "1000")]))
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000", revocationDate: 1_700_000_500_000)],
                                   entitlements: [entitlement("alice", original: "1000", state: .refunded)]))
        XCTAssertEqual(try ledger.entitlements(bundleId: "com.example.app", account: "alice").map(\.state), [.refunded])
    }

    /// A claim answers the account's entitlements as they stand after it: the row it wrote, or, when
    /// it changed nothing (the same facts again, or older ones), the row as it was.
    func testAClaimAnswersTheEntitlementsAsTheyStandAfterIt() throws {
        let ledger = try openLedger()
        let first = claim("alice", [transaction("1000", original: "1000")], entitlements: [entitlement("alice", original: "1000")],
                          now: 100)
        XCTAssertEqual(try ledger.claim(first).entitlements.map(\.state), [.active])
        XCTAssertEqual(try ledger.claim(first).entitlements.map(\.state), [.active])
        let refunded = claim("alice", [transaction("1000", original: "1000")],
                             entitlements: [entitlement("alice", original: "1000", state: .refunded)], now: 200)
        XCTAssertEqual(try ledger.claim(refunded).entitlements.map(\.state), [.refunded])
        XCTAssertEqual(try ledger.claim(first).entitlements.map(\.state), [.refunded], "an older fact changes nothing")
        var sameTime = refunded
        sameTime.entitlements[0].expiresDate = 2_100_000_000_000
        XCTAssertEqual(try ledger.claim(sameTime).entitlements.map(\.expiresDate), [2_100_000_000_000],
                       "a fact of the same time that differs is taken")
        XCTAssertEqual(try ledger.entitlements(bundleId: "com.example.app", account: "alice").map(\.expiresDate),
                       [2_100_000_000_000])
    }

    /// Two entitlements of one chain in one claim are written in turn, as each would be alone: the
    /// second is compared with the row as the first left it, not as it was read before either.
    func testASecondEntitlementOfAChainInOneClaimIsComparedWithTheFirstsRow() throws {
        let ledger = try openLedger()
        let active = entitlement("alice", original: "1000")
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000")], entitlements: [active], now: 200))
        let both = claim("alice", [transaction("1000", original: "1000")],
                         entitlements: [entitlement("alice", original: "1000", state: .refunded), active], now: 200)
        XCTAssertEqual(try ledger.claim(both).entitlements.map(\.state), [.active])
        XCTAssertEqual(try ledger.entitlements(bundleId: "com.example.app", account: "alice").map(\.state), [.active])
    }

    func testKnownTransactionTakesNewerFactsButKeepsFirstGrantTime() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000", signedDate: 10)], now: 111))
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000", signedDate: 20,
                                                         revocationDate: 15)], now: 222))
        XCTAssertEqual(try ledger.transactions(bundleId: "com.example.app", originalTransactionId: "1000")
            .first?.revocationDate, 15)
        let firstGranted = try ledger.database.withConnection { (connection) throws(VerificationError) in
            try connection.query("SELECT first_granted_at FROM transactions") { (row) throws(VerificationError) in
                try row.requiredInteger(0)
            }
        }
        XCTAssertEqual(firstGranted, [111])
    }

    func testStaleEvidenceDoesNotEraseARevocation() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000", signedDate: 20, revocationDate: 15)]))
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000", signedDate: 10)]))
        // A legacy receipt carries no signedDate: it cannot prove the refund was reversed either.
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000")]))
        XCTAssertEqual(try ledger.transactions(bundleId: "com.example.app", originalTransactionId: "1000")
            .first?.revocationDate, 15)
    }

    func testStoredTransactionIsCanonicalJSONWithSortedKeys() throws {
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000")]))
        let json = try ledger.database.withConnection { (connection) throws(VerificationError) in
            try connection.query("SELECT canonical_json FROM transactions") { (row) throws(VerificationError) in
                try row.requiredText(0)
            }
        }.first ?? ""
        // Sorted keys; "/" is written plainly (JSONEncoder wrote "\/": the same JSON string).
        XCTAssertTrue(json.hasPrefix(#"{"bundleId":"com.example.app","mappingVersion":"serverAPI/v1","#), json)
    }

    func testSealedReceiptBytesAreStoredAndReplacedAsGiven() throws {
        let ledger = try openLedger()
        XCTAssertNil(try ledger.latestReceipt(bundleId: "com.example.app", originalTransactionId: "1000"))
        try ledger.storeLatestReceipt(bundleId: "com.example.app", originalTransactionId: "1000",
                                      sealedReceipt: Data([0, 1, 2, 255]))
        try ledger.storeLatestReceipt(bundleId: "com.example.app", originalTransactionId: "1000",
                                      sealedReceipt: Data([9, 0, 9]))
        XCTAssertEqual(try ledger.latestReceipt(bundleId: "com.example.app", originalTransactionId: "1000"),
                       Data([9, 0, 9]))
    }
}
