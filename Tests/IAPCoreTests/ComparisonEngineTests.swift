import IAPMapping
import XCTest
import IAPCore

final class ComparisonEngineTests: XCTestCase {
    static let now: Int64 = 1_800_000_000_000
    static let day: Int64 = 86_400_000

    /// The comparator the gateway builds: known differences from the shipped mapping files.
    private func shippedComparator() throws -> (PurchaseComparator, MappingSet) {
        let mappings = try MappingTestSupport.shipped()
        let files = [try XCTUnwrap(mappings.latest(source: "verifyReceipt")), try XCTUnwrap(mappings.latest(source: "serverAPI"))]
        return (PurchaseComparator(mappingFiles: files), mappings)
    }

    private func subscription(_ id: String, source: String, expires: Int64 = now + 20 * day) -> CanonicalTransaction {
        var t = CanonicalTransaction(transactionId: id, productId: "pro.monthly", source: source,
                                     mappingVersion: source == "verifyReceipt" ? "verifyReceipt/v1" : "serverAPI/v1")
        t.originalTransactionId = "1000"
        t.purchaseDate = Self.now - 10 * Self.day
        t.expiresDate = expires
        t.quantity = 1
        t.environment = .production
        return t
    }

    private func pair(_ ids: [String]) -> ([CanonicalTransaction], [CanonicalTransaction]) {
        (ids.map { subscription($0, source: "verifyReceipt") }, ids.map { subscription($0, source: "serverAPI") })
    }

    private func compare(_ c: PurchaseComparator, _ legacy: [CanonicalTransaction], _ server: [CanonicalTransaction],
                         legacyRenewals: [CanonicalRenewal] = [], serverRenewals: [CanonicalRenewal] = []) -> PurchaseComparison {
        c.compare(legacy: ComparedPath(transactions: legacy, renewals: legacyRenewals, mappingVersion: "verifyReceipt/v1"),
                  serverAPI: ComparedPath(transactions: server, renewals: serverRenewals, mappingVersion: "serverAPI/v1"),
                  id: "c1", bundleId: "com.example", evidenceKind: "receipt", evidenceSHA256: String(repeating: "a", count: 64),
                  now: Self.now)
    }

    func testIdenticalAnswersInAnotherOrderAgreeAndRecordBothMappingVersions() throws {
        let (comparator, _) = try shippedComparator()
        let (legacy, server) = pair(["1", "2", "3"])
        let result = compare(comparator, legacy, server.reversed())
        XCTAssertTrue(result.agreed, "\(result.differences)")
        XCTAssertEqual(result.transactionCount, 3)
        XCTAssertEqual(result.legacyMappingVersion, "verifyReceipt/v1")
        XCTAssertEqual(result.serverAPIMappingVersion, "serverAPI/v1")
        XCTAssertEqual(result.productIds, ["pro.monthly"])
    }

    func testAConsumableTheReceiptDoesNotTypeIsCreditedOnBothPaths() throws {
        let (comparator, _) = try shippedComparator()
        var (legacy, server) = pair(["1"])
        legacy[0].expiresDate = nil
        server[0].expiresDate = nil
        legacy[0].productId = "coins"
        server[0].productId = "coins"
        server[0].type = .consumable
        let result = compare(comparator, legacy, server)
        XCTAssertFalse(result.differences.contains { $0.kind == .entitlementMismatch }, "\(result.differences)")
        server[0].revocationDate = Self.now
        let refunded = compare(comparator, legacy, server)
        XCTAssertEqual(refunded.differences.filter { $0.kind == .entitlementMismatch }.map(\.serverAPIValue), ["\"refunded\""],
                       "a refund still differs from a credit")
        XCTAssertEqual(refunded.differences.filter { $0.kind == .entitlementMismatch }.map(\.legacyValue), ["\"credited\""])
    }

    func testFieldsDeclaredAsKnownDifferencesInEitherMappingFileAreNotReported() throws {
        let (comparator, mappings) = try shippedComparator()
        let declared = try XCTUnwrap(mappings.latest(source: "serverAPI")).knownDifferences(kind: "transaction")
        XCTAssertNotNil(declared["price"], "the shipped serverAPI mapping declares price as a known difference")
        var (legacy, server) = pair(["1"])
        server[0].price = 4_990
        server[0].currency = "USD"
        server[0].storefront = "USA"
        server[0].signedDate = Self.now
        legacy[0].source = "somethingElse"
        legacy[0].mappingVersion = "verifyReceipt/v9"
        XCTAssertTrue(compare(comparator, legacy, server).agreed)
    }

    func testTransactionsPresentInOnePathOnlyAreReportedPerSide() throws {
        let (comparator, _) = try shippedComparator()
        let (legacy, server) = pair(["1", "2", "3"])
        let result = compare(comparator, Array(legacy.prefix(2)), Array(server.suffix(2)))
        XCTAssertEqual(result.differences.map(\.kind), [.onlyInLegacy, .onlyInServerAPI])
        XCTAssertEqual(result.differences.map(\.transactionId), ["1", "3"])
        XCTAssertEqual(result.differences[0].productId, "pro.monthly")
        XCTAssertNotNil(result.differences[0].legacyValue)
        XCTAssertNil(result.differences[0].serverAPIValue)
        XCTAssertEqual(result.transactionCount, 3)
    }

    func testADifferentProductIsAFieldMismatchWithBothValuesAsJSON() throws {
        let (comparator, _) = try shippedComparator()
        var (legacy, server) = pair(["1"])
        server[0].productId = "pro.yearly"
        let result = compare(comparator, legacy, server)
        XCTAssertEqual(result.differences, [ComparisonDifference(
            kind: .fieldMismatch, transactionId: "1", productId: "pro.monthly", field: "productId",
            legacyValue: #""pro.monthly""#, serverAPIValue: #""pro.yearly""#)])
        legacy[0].quantity = nil
        XCTAssertEqual(compare(comparator, legacy, server).differences.last?.field, "quantity")
        XCTAssertNil(compare(comparator, legacy, server).differences.last?.legacyValue)
    }

    func testARefundInOnePathIsOneEntitlementMismatch() throws {
        let (comparator, _) = try shippedComparator()
        var (legacy, server) = pair(["1"])
        server[0].revocationDate = Self.now - Self.day
        server[0].revocationReason = .appIssue
        let result = compare(comparator, legacy, server)
        XCTAssertEqual(result.differences, [ComparisonDifference(
            kind: .entitlementMismatch, transactionId: "1", productId: "pro.monthly", field: "entitlementState",
            legacyValue: #""active""#, serverAPIValue: #""refunded""#)])
    }

    func testAnotherExpiryIsOneExpiryMismatchEvenWhenItFlipsTheState() throws {
        let (comparator, _) = try shippedComparator()
        var (legacy, server) = pair(["1"])
        server[0].expiresDate = Self.now - Self.day
        let result = compare(comparator, legacy, server)
        XCTAssertEqual(result.differences, [ComparisonDifference(
            kind: .expiryMismatch, transactionId: "1", productId: "pro.monthly", field: "expiresDate",
            legacyValue: String(Self.now + 20 * Self.day), serverAPIValue: String(Self.now - Self.day))])
    }

    func testRenewalStateDifferencesAreEntitlementAndRenewalFieldMismatches() throws {
        let (comparator, _) = try shippedComparator()
        let (legacy, server) = pair(["1"]).self
        let expired = (legacy.map { var t = $0; t.expiresDate = Self.now - Self.day; return t },
                       server.map { var t = $0; t.expiresDate = Self.now - Self.day; return t })
        var l = CanonicalRenewal(originalTransactionId: "1000", source: "verifyReceipt", mappingVersion: "verifyReceipt/v1")
        var r = CanonicalRenewal(originalTransactionId: "1000", source: "serverAPI", mappingVersion: "serverAPI/v1")
        l.isInBillingRetryPeriod = false
        r.isInBillingRetryPeriod = true
        let result = compare(comparator, expired.0, expired.1, legacyRenewals: [l], serverRenewals: [r])
        XCTAssertEqual(result.differences.map(\.kind), [.entitlementMismatch, .fieldMismatch])
        XCTAssertEqual(result.differences.map(\.field), ["entitlementState", "renewal.isInBillingRetryPeriod"])
        XCTAssertEqual(result.differences[0].serverAPIValue, #""billingRetry""#)
    }

    func testAFailedPathIsRecordedWithItsCodeAndNothingElseIsCompared() throws {
        let (comparator, _) = try shippedComparator()
        let (legacy, _) = pair(["1", "2"])
        let result = comparator.compare(
            legacy: ComparedPath(transactions: legacy, mappingVersion: "verifyReceipt/v1"),
            serverAPI: .failed("UPSTREAM_CREDENTIALS_REJECTED", mappingVersion: "serverAPI/v1"),
            id: "c2", bundleId: "b", evidenceKind: "receipt", evidenceSHA256: "x", now: Self.now)
        XCTAssertFalse(result.agreed)
        XCTAssertEqual(result.serverAPIError, "UPSTREAM_CREDENTIALS_REJECTED")
        XCTAssertNil(result.legacyError)
        XCTAssertEqual(result.differences, [])
        XCTAssertEqual(result.serverAPIMappingVersion, "serverAPI/v1")
        XCTAssertEqual(result.transactionCount, 2)
    }

    func testKnownDifferencesAreTheUnionOfBothFilesPerTarget() throws {
        let (_, mappings) = try shippedComparator()
        let legacy = try XCTUnwrap(mappings.latest(source: "verifyReceipt"))
        let server = try XCTUnwrap(mappings.latest(source: "serverAPI"))
        let known = KnownDifferences(mappingFiles: [legacy, server])
        XCTAssertTrue(known.transaction.isSuperset(of: ["price", "currency", "storefront", "signedDate"]))
        XCTAssertTrue(known.renewal.contains("renewalPrice"))
        XCTAssertFalse(known.transaction.contains("productId"))
        XCTAssertFalse(KnownDifferences(mappingFiles: [legacy]).transaction.contains("price"))
    }
}
