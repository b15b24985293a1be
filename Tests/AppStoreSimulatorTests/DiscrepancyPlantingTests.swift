import AppleTrust
@testable import AppStoreSimulator
import Foundation
import IAPCore
import XCTest

/// Planting proves a migration comparison on known ground truth: each plant must change exactly
/// one field (or presence) of exactly one transaction in exactly one generation.
final class DiscrepancyPlantingTests: XCTestCase {
    private func setUp(count: Int = 4) async throws -> (SimulatorFixture, GenerationReader, [SimulatedPurchase]) {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let purchases = try f.sim.makeConsistentPurchases(count: count, bundleId: SimulatorFixture.bundleId, ownerPrefix: "buyer")
        return (f, try GenerationReader(f), purchases)
    }

    func testUnplantedPurchasesAgreeInBothGenerationsApartFromDeclaredKnownDifferences() async throws {
        let (f, reader, purchases) = try await setUp(count: 6)
        _ = try f.sim.renew(originalTransactionId: purchases[0].originalTransactionId)
        for p in purchases {
            let legacy = try await reader.legacyRecords(receipt: p.receiptBase64)
            let server = try await reader.serverAPIRecords(anyTransactionId: p.transactionId)
            XCTAssertFalse(legacy.isEmpty)
            XCTAssertEqual(Set(legacy.keys), Set(server.keys))
            XCTAssertEqual(reader.disagreements(legacy: legacy, serverAPI: server), [], "purchase \(p.transactionId)")
        }
        // The declared differences are real: price is in the Server API only, and still ignored.
        let server = try await reader.serverAPIRecords(anyTransactionId: purchases[1].transactionId)
        let legacy = try await reader.legacyRecords(receipt: purchases[1].receiptBase64)
        XCTAssertEqual(server[purchases[1].transactionId]?.price, 9_990)
        XCTAssertNil(legacy[purchases[1].transactionId]?.price)
        XCTAssertTrue(reader.knownDifferences.contains("price"))
    }

    func testRefundPlantedOnEitherSideShowsARefundOnThatSideOnly() async throws {
        for side in SimulatorGeneration.allCases {
            let (f, reader, purchases) = try await setUp()
            let target = purchases[0], neighbour = purchases[1]
            let legacyBefore = try await reader.legacyRecords(receipt: target.receiptBase64)
            let serverBefore = try await reader.serverAPIRecords(anyTransactionId: target.transactionId)
            try f.sim.plant(.refundOnlyIn(side), transactionId: target.transactionId)

            let legacy = try await reader.legacyRecords(receipt: target.receiptBase64)
            let server = try await reader.serverAPIRecords(anyTransactionId: target.transactionId)
            let id = target.transactionId
            XCTAssertEqual(reader.disagreements(legacy: legacy, serverAPI: server),
                           ["\(id):revocationDate", "\(id):revocationReason"], "side \(side)")
            let (changed, unchanged, unchangedBefore) = side == .legacy
                ? (legacy[id], server[id], serverBefore[id]) : (server[id], legacy[id], legacyBefore[id])
            XCTAssertNotNil(changed?.revocationDate)
            XCTAssertEqual(changed?.revocationReason, RevocationReason(rawValue: 0))
            XCTAssertNil(unchanged?.revocationDate)
            XCTAssertEqual(unchanged.map { reader.differingFields($0, unchangedBefore!) }, [])
            if side == .serverAPI {
                // Get All Subscription Statuses says revoked (5) on the refunded side.
                let statuses = try await reader.statusTransactions(anyTransactionId: id)
                XCTAssertEqual(statuses.map(\.status), [5])
                XCTAssertNotNil(statuses.first?.transaction.revocationDate)
            }
            let neighbourDiff = try await reader.compare(neighbour)
            XCTAssertEqual(neighbourDiff, [])
        }
    }

    func testDifferentExpiresDateMovesExpiryOnTheChosenSideOnly() async throws {
        for side in SimulatorGeneration.allCases {
            let (f, reader, purchases) = try await setUp()
            let id = purchases[0].transactionId
            let before = try await reader.legacyRecords(receipt: purchases[0].receiptBase64)[id]?.expiresDate
            try f.sim.plant(.differentExpiresDate(side, offsetSeconds: -3 * 86_400), transactionId: id)

            let legacy = try await reader.legacyRecords(receipt: purchases[0].receiptBase64)
            let server = try await reader.serverAPIRecords(anyTransactionId: id)
            XCTAssertEqual(reader.disagreements(legacy: legacy, serverAPI: server), ["\(id):expiresDate"])
            let (changed, unchanged) = side == .legacy ? (legacy[id], server[id]) : (server[id], legacy[id])
            XCTAssertEqual(changed?.expiresDate, before.map { $0 - 3 * 86_400_000 })
            XCTAssertEqual(unchanged?.expiresDate, before)
            if side == .serverAPI {
                let info = try await reader.transactionInfo(id)
                XCTAssertEqual(try info.get().expiresDate, before.map { $0 - 3 * 86_400_000 })
            }
            let neighbourDiff = try await reader.compare(purchases[1])
            XCTAssertEqual(neighbourDiff, [])
        }
    }

    func testDifferentProductNamesAnotherProductOnTheChosenSideOnly() async throws {
        for side in SimulatorGeneration.allCases {
            let (f, reader, purchases) = try await setUp()
            let p = purchases[2] // a non-consumable
            try f.sim.plant(.differentProduct(side, productId: "com.example.sim.other"), transactionId: p.transactionId)

            let legacy = try await reader.legacyRecords(receipt: p.receiptBase64)
            let server = try await reader.serverAPIRecords(anyTransactionId: p.transactionId)
            XCTAssertEqual(reader.disagreements(legacy: legacy, serverAPI: server), ["\(p.transactionId):productId"])
            let (changed, unchanged) = side == .legacy ? (legacy, server) : (server, legacy)
            XCTAssertEqual(changed[p.transactionId]?.productId, "com.example.sim.other")
            XCTAssertEqual(unchanged[p.transactionId]?.productId, p.productId)
            XCTAssertEqual(f.sim.plantedDiscrepancies, [PlantedTransaction(
                transactionId: p.transactionId, discrepancy: .differentProduct(side, productId: "com.example.sim.other"),
                bundleId: SimulatorFixture.bundleId, productId: p.productId)])
            let neighbourDiff = try await reader.compare(purchases[0])
            XCTAssertEqual(neighbourDiff, [])
        }
    }

    func testOnlyInLegacyHidesTheTransactionFromTheServerAPIWhileTheReceiptStillListsIt() async throws {
        let (f, reader, purchases) = try await setUp()
        let first = purchases[0]
        let renewal = try f.sim.renew(originalTransactionId: first.originalTransactionId)
        try f.sim.plant(.onlyInLegacy, transactionId: renewal.transactionId)

        XCTAssertEqual(try reader.receiptTransactionIds(renewal.receiptBase64), [first.transactionId, renewal.transactionId])
        let legacy = try await reader.legacyRecords(receipt: renewal.receiptBase64)
        // The history (asked with an id the Server API knows) leaves it out; asked with its own id, 404.
        let server = try await reader.serverAPIRecords(anyTransactionId: first.transactionId)
        let hidden = try await f.serverAPI("/inApps/v2/history/\(renewal.transactionId)", token: try f.token())
        XCTAssertEqual(hidden.status, 404)
        XCTAssertEqual(try f.json(hidden)["errorCode"], .int(4040010))
        XCTAssertEqual(Set(legacy.keys), [first.transactionId, renewal.transactionId])
        XCTAssertEqual(Set(server.keys), [first.transactionId])
        XCTAssertEqual(reader.disagreements(legacy: legacy, serverAPI: server), ["\(renewal.transactionId):onlyInLegacy"])

        let info = try await reader.transactionInfo(renewal.transactionId)
        XCTAssertEqual(info.failure, ServerAPIRefusal(status: 404, errorCode: .int(4040010)))
        // Statuses step back to the newest transaction the Server API still shows.
        let statuses = try await reader.statusTransactions(anyTransactionId: first.transactionId)
        XCTAssertEqual(statuses.map(\.transaction.transactionId), [first.transactionId])
        let neighbourDiff = try await reader.compare(purchases[1])
        XCTAssertEqual(neighbourDiff, [])
    }

    func testOnlyInServerAPIHidesTheTransactionFromVerifyReceiptJSONWhileTheReceiptStillListsIt() async throws {
        let (f, reader, purchases) = try await setUp()
        let p = purchases[2]
        try f.sim.plant(.onlyInServerAPI, transactionId: p.transactionId)

        XCTAssertEqual(try reader.receiptTransactionIds(p.receiptBase64), [p.transactionId])
        let legacy = try await reader.legacyRecords(receipt: p.receiptBase64)
        let server = try await reader.serverAPIRecords(anyTransactionId: p.transactionId)
        XCTAssertEqual(Set(legacy.keys), [])
        XCTAssertEqual(Set(server.keys), [p.transactionId])
        XCTAssertEqual(reader.disagreements(legacy: legacy, serverAPI: server), ["\(p.transactionId):onlyInServerAPI"])
        let info = try await reader.transactionInfo(p.transactionId)
        XCTAssertEqual(try info.get().transactionId, p.transactionId)
        let neighbourDiff = try await reader.compare(purchases[0])
        XCTAssertEqual(neighbourDiff, [])
    }

    func testEveryKindPlantedAmongManyPurchasesYieldsExactlyThePlantedDisagreements() async throws {
        let (f, reader, purchases) = try await setUp(count: 45)
        let subscriptions = purchases.filter { $0.productId.hasSuffix(".monthly") }
        let plants: [PlantedDiscrepancy] = [
            .refundOnlyInLegacy, .refundOnlyInServerAPI,
            .differentExpiresDate(.legacy, offsetSeconds: 60), .differentExpiresDate(.serverAPI, offsetSeconds: -86_400),
            .differentProduct(.legacy, productId: "com.example.sim.yearly"),
            .differentProduct(.serverAPI, productId: "com.example.sim.yearly"),
            .onlyInLegacy, .onlyInServerAPI,
        ]
        var expected: Set<String> = []
        for (i, plant) in plants.enumerated() {
            let id = subscriptions[i * 3 + 1].transactionId
            try f.sim.plant(plant, transactionId: id)
            switch plant {
            case .refundOnlyIn: expected.formUnion(["\(id):revocationDate", "\(id):revocationReason"])
            case .onlyInLegacy: expected.insert("\(id):onlyInLegacy")
            case .onlyInServerAPI: expected.insert("\(id):onlyInServerAPI")
            default: expected.insert("\(id):\(plant.canonicalField!)")
            }
        }
        XCTAssertEqual(f.sim.plantedDiscrepancies.map(\.discrepancy), plants)

        var found: Set<String> = []
        for p in purchases { found.formUnion(try await reader.compare(p)) }
        XCTAssertEqual(found, expected)

        f.sim.removeAllPlants()
        var after: Set<String> = []
        for p in purchases { after.formUnion(try await reader.compare(p)) }
        XCTAssertEqual(after, [])
    }

    func testPlantsThatWouldChangeNothingAreRefused() async throws {
        let (f, _, purchases) = try await setUp()
        let nonConsumable = purchases[2]
        XCTAssertThrowsError(try f.sim.plant(.differentExpiresDate(.legacy, offsetSeconds: 60), transactionId: nonConsumable.transactionId))
        XCTAssertThrowsError(try f.sim.plant(.differentExpiresDate(.legacy, offsetSeconds: 0), transactionId: purchases[0].transactionId))
        XCTAssertThrowsError(try f.sim.plant(.differentProduct(.serverAPI, productId: nonConsumable.productId),
                                             transactionId: nonConsumable.transactionId))
        XCTAssertThrowsError(try f.sim.plant(.onlyInLegacy, transactionId: "999"))
        _ = try f.sim.refund(transactionId: purchases[1].transactionId)
        XCTAssertThrowsError(try f.sim.plant(.refundOnlyInLegacy, transactionId: purchases[1].transactionId))
        XCTAssertEqual(f.sim.plantedDiscrepancies, [])
        // A second plant on the same transaction replaces the first.
        try f.sim.plant(.onlyInLegacy, transactionId: purchases[0].transactionId)
        try f.sim.plant(.onlyInServerAPI, transactionId: purchases[0].transactionId)
        XCTAssertEqual(f.sim.plantedDiscrepancies.map(\.discrepancy), [.onlyInServerAPI])
        XCTAssertTrue(f.sim.removePlant(transactionId: purchases[0].transactionId))
        XCTAssertFalse(f.sim.removePlant(transactionId: purchases[0].transactionId))
    }

    func testConsistentPurchasesHaveOneOwnerAndOneReceiptEach() async throws {
        let (_, reader, purchases) = try await setUp(count: 9)
        XCTAssertEqual(purchases.count, 9)
        XCTAssertEqual(Set(purchases.map(\.transactionId)).count, 9)
        XCTAssertEqual(purchases.filter { $0.productId == "com.example.sim.pro" }.count, 3)
        for p in purchases {
            XCTAssertEqual(try reader.receiptTransactionIds(p.receiptBase64), [p.transactionId])
        }
    }
}

extension Result {
    var failure: Failure? { if case .failure(let e) = self { e } else { nil } }
}
