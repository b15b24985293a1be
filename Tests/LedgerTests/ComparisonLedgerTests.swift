import Foundation
import IAPCore
import Synchronization
import XCTest
@testable import Ledger

final class ComparisonLedgerTests: LedgerTestCase {
    private func comparison(_ id: String, bundleId: String = "com.example.app", at time: Int64,
                            products: [String] = ["pro"], _ differences: [ComparisonDifference] = [],
                            serverAPIError: String? = nil) -> PurchaseComparison {
        PurchaseComparison(id: id, bundleId: bundleId, comparedAt: time, evidenceKind: "receipt",
                           evidenceSHA256: String(repeating: "b", count: 64), legacyMappingVersion: "verifyReceipt/v1",
                           serverAPIMappingVersion: "serverAPI/v1", transactionCount: 2, differences: differences,
                           serverAPIError: serverAPIError, productIds: products)
    }

    private func difference(_ kind: ComparisonDifference.Kind, field: String?, product: String = "pro") -> ComparisonDifference {
        ComparisonDifference(kind: kind, transactionId: "t-\(kind.rawValue)", productId: product, field: field,
                             legacyValue: #""a""#, serverAPIValue: nil)
    }

    private func seeded() throws -> SQLLedger {
        let ledger = try openLedger()
        try ledger.recordComparison(comparison("agreed-1", at: 1_000))
        try ledger.recordComparison(comparison("refund", at: 2_000, [difference(.entitlementMismatch, field: "entitlementState")]))
        try ledger.recordComparison(comparison("expiry", at: 3_000, products: ["pro", "coins"],
                                               [difference(.expiryMismatch, field: "expiresDate"),
                                                difference(.fieldMismatch, field: "quantity", product: "coins")]))
        try ledger.recordComparison(comparison("failed", at: 4_000, serverAPIError: "UPSTREAM_CREDENTIALS_REJECTED"))
        try ledger.recordComparison(comparison("other-app", bundleId: "com.other", at: 2_500,
                                               [difference(.onlyInLegacy, field: nil)]))
        return ledger
    }

    func testAStoredComparisonReadsBackWithEveryDifferenceInOrder() throws {
        let ledger = try seeded()
        let found = try ledger.comparisons(ComparisonQuery(bundleId: "com.example.app"))
        XCTAssertEqual(found.map(\.id), ["failed", "expiry", "refund", "agreed-1"], "newest first, this app only")
        let expiry = try XCTUnwrap(found.first { $0.id == "expiry" })
        XCTAssertEqual(expiry, comparison("expiry", at: 3_000, products: ["coins", "pro"],
                                          [difference(.expiryMismatch, field: "expiresDate"),
                                           difference(.fieldMismatch, field: "quantity", product: "coins")]))
        XCTAssertEqual(found.first?.serverAPIError, "UPSTREAM_CREDENTIALS_REJECTED")
        XCTAssertEqual(found.first?.legacyMappingVersion, "verifyReceipt/v1")
    }

    func testFiltersByTimeClassFieldProductAndLimit() throws {
        let ledger = try seeded()
        func ids(_ q: ComparisonQuery) throws -> [String] { try ledger.comparisons(q).map(\.id) }
        let app = "com.example.app"
        XCTAssertEqual(try ids(ComparisonQuery(bundleId: app, from: 2_000, to: 3_000)), ["expiry", "refund"])
        XCTAssertEqual(try ids(ComparisonQuery(bundleId: app, kind: .entitlementMismatch)), ["refund"])
        XCTAssertEqual(try ids(ComparisonQuery(bundleId: app, kind: .onlyInLegacy)), [])
        XCTAssertEqual(try ids(ComparisonQuery(bundleId: app, field: "quantity")), ["expiry"])
        XCTAssertEqual(try ids(ComparisonQuery(bundleId: app, kind: .fieldMismatch, field: "expiresDate")), [],
                       "class and field must hold for the same difference")
        XCTAssertEqual(try ids(ComparisonQuery(bundleId: app, productId: "coins")), ["expiry"])
        XCTAssertEqual(try ids(ComparisonQuery(bundleId: app, productId: "pro")).count, 4, "agreed comparisons match their products")
        XCTAssertEqual(try ids(ComparisonQuery(bundleId: app, limit: 2)), ["failed", "expiry"])
        XCTAssertEqual(try ids(ComparisonQuery(bundleId: "com.other")), ["other-app"])
    }

    func testCountsAreTotalAndAgreedPerAppWithinTheRange() throws {
        let ledger = try seeded()
        XCTAssertEqual(try ledger.comparisonCounts(bundleId: "com.example.app", from: nil, to: nil),
                       ComparisonCounts(total: 4, agreed: 1))
        XCTAssertEqual(try ledger.comparisonCounts(bundleId: "com.example.app", from: 2_000, to: nil),
                       ComparisonCounts(total: 3, agreed: 0))
        XCTAssertEqual(try ledger.comparisonCounts(bundleId: "com.nobody", from: nil, to: nil),
                       ComparisonCounts(total: 0, agreed: 0))
    }

    func testStoringTheSameIdAgainReplacesItAndItsDifferences() throws {
        let ledger = try seeded()
        try ledger.recordComparison(comparison("refund", at: 2_000))
        let found = try ledger.comparisons(ComparisonQuery(bundleId: "com.example.app", kind: .entitlementMismatch))
        XCTAssertEqual(found, [])
        XCTAssertEqual(try ledger.comparisonCounts(bundleId: "com.example.app", from: nil, to: nil),
                       ComparisonCounts(total: 4, agreed: 2))
    }

    func testComparisonsSurviveReopening() throws {
        _ = try seeded()
        let reopened = try openLedger()
        XCTAssertEqual(try reopened.comparisons(ComparisonQuery(bundleId: "com.example.app")).count, 4)
    }

    func testTheSameComparisonStoredByManyWritersAtOnceEndsAsOneWholeRecord() throws {
        let ledger = try openLedger()
        let versions = (0..<8).map { i in
            comparison("same", at: 1_000 + Int64(i), (0...i).map { _ in difference(.fieldMismatch, field: "quantity") })
        }
        let failures = Mutex<[VerificationError.Code]>([])
        DispatchQueue.concurrentPerform(iterations: versions.count) { i in
            do throws(VerificationError) { try ledger.recordComparison(versions[i]) } catch {
                failures.withLock { $0.append(error.code) }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, [])
        let stored = try ledger.comparisons(ComparisonQuery(bundleId: "com.example.app"))
        XCTAssertEqual(stored.count, 1)
        XCTAssertTrue(versions.contains(try XCTUnwrap(stored.first)), "one writer's record, not a mix")
    }

    func testAccountEnvironmentAndEachChainsStatesReadBackAndReplaceWithTheComparison() throws {
        let ledger = try openLedger()
        var c = comparison("chains", at: 5_000, [difference(.onlyInLegacy, field: nil)])
        c.account = "alice"
        c.environment = "Production"
        c.appVersion = "3.1"
        c.purchases = [
            ComparedPurchase(originalTransactionId: "t-onlyInLegacy", productId: "pro", productType: "Non-Consumable",
                             legacyState: .active, legacyExpiresDate: nil, serverAPIState: nil, serverAPIExpiresDate: nil,
                             agreed: false),
            ComparedPurchase(originalTransactionId: "t-sub", productId: "monthly", productType: "Auto-Renewable Subscription",
                             legacyState: .active, legacyExpiresDate: 9_000, serverAPIState: .refunded,
                             serverAPIExpiresDate: 9_001, agreed: true),
        ]
        try ledger.recordComparison(c)
        XCTAssertEqual(try ledger.comparisons(ComparisonQuery(bundleId: "com.example.app")), [c])

        c.purchases = [c.purchases[1]]
        try ledger.recordComparison(c)
        XCTAssertEqual(try ledger.comparisons(ComparisonQuery(bundleId: "com.example.app")).first?.purchases, c.purchases,
                       "storing the same id again replaces its chains too")
    }

    func testFiltersByFailureCodeOfEitherPath() throws {
        let ledger = try seeded()
        var legacyDown = comparison("legacy-down", at: 4_500)
        legacyDown.legacyError = "UPSTREAM_UNAVAILABLE"
        try ledger.recordComparison(legacyDown)
        func ids(_ code: String) throws -> [String] {
            try ledger.comparisons(ComparisonQuery(bundleId: "com.example.app", failureCode: code)).map(\.id)
        }
        XCTAssertEqual(try ids("UPSTREAM_CREDENTIALS_REJECTED"), ["failed"])
        XCTAssertEqual(try ids("UPSTREAM_UNAVAILABLE"), ["legacy-down"])
        XCTAssertEqual(try ids("RATE_LIMITED"), [])
    }
}
