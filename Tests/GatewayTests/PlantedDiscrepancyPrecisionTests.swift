import AppStoreSimulator
import Demo
import Foundation
@testable import Gateway
import IAPCore
import Ledger
import TestSupport
import XCTest

/// What a planted discrepancy must be reported as: one difference per plant, nothing else.
struct ExpectedDifference: Hashable, CustomStringConvertible {
    let transactionId: String
    let kind: ComparisonDifference.Kind
    let field: String?

    var description: String { "\(transactionId) \(kind.rawValue) \(field ?? "-")" }

    init(transactionId: String, kind: ComparisonDifference.Kind, field: String?) {
        self.transactionId = transactionId
        self.kind = kind
        self.field = field
    }

    init(_ d: ComparisonDifference) { self.init(transactionId: d.transactionId, kind: d.kind, field: d.field) }

    init(_ plant: PlantedTransaction) {
        switch plant.discrepancy {
        case .refundOnlyIn: self.init(transactionId: plant.transactionId, kind: .entitlementMismatch, field: "entitlementState")
        case .differentExpiresDate: self.init(transactionId: plant.transactionId, kind: .expiryMismatch, field: "expiresDate")
        case .differentProduct: self.init(transactionId: plant.transactionId, kind: .fieldMismatch, field: "productId")
        case .onlyInLegacy: self.init(transactionId: plant.transactionId, kind: .onlyInLegacy, field: nil)
        case .onlyInServerAPI: self.init(transactionId: plant.transactionId, kind: .onlyInServerAPI, field: nil)
        }
    }
}

/// The simulator's planted discrepancies among many consistent purchases: the comparison must
/// report exactly them (precision and recall 1.0) and none of the declared benign differences.
final class PlantedDiscrepancyPrecisionTests: XCTestCase {
    static let owners = "planted"

    func testComparisonReportsExactlyThePlantedDiscrepanciesAmongSixtyConsistentPurchases() async throws {
        let gw = try await GatewayE2E.start(self) { $0.receiptRouting = "compare"; $0.nonceRequired = false }
        let sim = gw.simulator
        let purchases = try sim.makeConsistentPurchases(count: 60, bundleId: gw.bundleId, ownerPrefix: Self.owners)
        let monthly = purchases.enumerated().filter { $0.offset % 3 != 2 }.map(\.element)
        let pro = purchases.enumerated().filter { $0.offset % 3 == 2 }.map(\.element)
        // A second purchase on two subscribers' receipts, so a transaction can be missing from one
        // path while the receipt still has another. (Not a renewal: with exclude-old-transactions,
        // verifyReceipt's older renewals come from in_app, which carries no subscription group.)
        let secondA = try sim.purchase(PurchaseRequest(bundleId: gw.bundleId, productId: "\(gw.bundleId).pro",
                                                       type: .nonConsumable, owner: "\(Self.owners)-30"))
        let secondB = try sim.purchase(PurchaseRequest(bundleId: gw.bundleId, productId: "\(gw.bundleId).pro",
                                                       type: .nonConsumable, owner: "\(Self.owners)-31"))

        try sim.plant(.refundOnlyInLegacy, transactionId: monthly[0].transactionId)
        try sim.plant(.refundOnlyInServerAPI, transactionId: monthly[1].transactionId)
        try sim.plant(.refundOnlyInLegacy, transactionId: pro[0].transactionId)
        try sim.plant(.refundOnlyInServerAPI, transactionId: pro[1].transactionId)
        try sim.plant(.differentExpiresDate(.legacy, offsetSeconds: 86_400), transactionId: monthly[2].transactionId)
        try sim.plant(.differentExpiresDate(.serverAPI, offsetSeconds: -3_600), transactionId: monthly[3].transactionId)
        try sim.plant(.differentProduct(.legacy, productId: "\(gw.bundleId).other"), transactionId: pro[2].transactionId)
        try sim.plant(.differentProduct(.serverAPI, productId: "\(gw.bundleId).other"), transactionId: pro[3].transactionId)
        try sim.plant(.onlyInLegacy, transactionId: secondA.transactionId)
        try sim.plant(.onlyInServerAPI, transactionId: secondB.transactionId)
        // The only purchase of its receipt unknown to the Server API (404 4040010): a finding, not a path failure.
        try sim.plant(.onlyInLegacy, transactionId: pro[4].transactionId)
        let planted = sim.plantedDiscrepancies
        XCTAssertEqual(planted.count, 11)

        let receipts = try (0..<60).map { i in
            BatchReceipt(receipt: try sim.receipt(owner: "\(Self.owners)-\(i)", bundleId: gw.bundleId), account: "acct-\(i)")
        }
        let summary = try await gw.harness.parts.batchComparer(bundleId: gw.bundleId).run(receipts)
        XCTAssertEqual(summary.total, 60)
        XCTAssertEqual(summary.failed, 0, "\(summary.failedByCode)")

        let stored = try gw.harness.parts.storedLedger.comparisons(ComparisonQuery(bundleId: gw.bundleId, limit: 1000))
        XCTAssertEqual(stored.count, 60)
        let reported = stored.flatMap(\.differences)
        let expected = Set(planted.map(ExpectedDifference.init))
        XCTAssertEqual(Set(reported.map(ExpectedDifference.init)), expected, "precision and recall must both be 1.0")
        XCTAssertEqual(reported.count, expected.count, "each plant is reported once: \(reported)")
        XCTAssertEqual(summary.disagreed, 11)
        XCTAssertEqual(summary.agreed, 49)

        let known = gw.harness.parts.migration!.comparator.knownDifferences
        XCTAssertTrue(known.transaction.contains("price"), "the mappings declare price as a benign difference: \(known)")
        XCTAssertTrue(reported.allSatisfy { d in d.field.map { !known.transaction.contains($0) } ?? true },
                      "declared benign differences are never reported")
    }
}
