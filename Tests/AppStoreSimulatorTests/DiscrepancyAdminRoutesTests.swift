@testable import AppStoreSimulator
import Foundation
import IAPCore
import XCTest

final class DiscrepancyAdminRoutesTests: XCTestCase {
    func testPlantRouteChangesOneGenerationAndDeleteRoutesRestoreAgreement() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let reader = try GenerationReader(f)
        let purchases = try f.sim.makeConsistentPurchases(count: 3, bundleId: SimulatorFixture.bundleId, ownerPrefix: "admin")
        let a = purchases[0], b = purchases[1]

        var (status, json) = try await f.admin("POST", "/transactions/\(a.transactionId)/plant",
                                               body: .object(["kind": .string("expiresDate"), "side": .string("serverAPI"),
                                                              "offsetSeconds": .int(3600)]))
        XCTAssertEqual(status, 200)
        XCTAssertEqual(json["plants"]?.arrayValue?.count, 1)
        (status, _) = try await f.admin("POST", "/transactions/\(b.transactionId)/plant",
                                        body: .object(["kind": .string("onlyInServerAPI")]))
        XCTAssertEqual(status, 200)
        XCTAssertEqual(f.sim.plantedDiscrepancies.map(\.discrepancy),
                       [.differentExpiresDate(.serverAPI, offsetSeconds: 3600), .onlyInServerAPI])

        let diffA = try await reader.compare(a)
        XCTAssertEqual(diffA, ["\(a.transactionId):expiresDate"])
        let diffB = try await reader.compare(b)
        XCTAssertEqual(diffB, ["\(b.transactionId):onlyInServerAPI"])

        (status, json) = try await f.admin("GET", "/plants")
        XCTAssertEqual(status, 200)
        let listed = try XCTUnwrap(json["plants"]?.arrayValue)
        XCTAssertEqual(listed.first?.objectValue?["transactionId"], .string(a.transactionId))
        XCTAssertEqual(listed.first?.objectValue?["discrepancy"],
                       PlantedDiscrepancy.differentExpiresDate(.serverAPI, offsetSeconds: 3600).json)

        (status, _) = try await f.admin("DELETE", "/transactions/\(a.transactionId)/plant")
        XCTAssertEqual(status, 200)
        let diffAfterRemoval = try await reader.compare(a)
        XCTAssertEqual(diffAfterRemoval, [])
        (status, _) = try await f.admin("DELETE", "/transactions/\(a.transactionId)/plant")
        XCTAssertEqual(status, 404)

        (status, json) = try await f.admin("DELETE", "/plants")
        XCTAssertEqual(status, 200)
        XCTAssertEqual(json["plants"], .array([]))
        let diffBAfterReset = try await reader.compare(b)
        XCTAssertEqual(diffBAfterReset, [])
    }

    func testPlantRouteRefusesBadBodiesAndUnknownTransactions() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let p = try f.sim.makeConsistentPurchases(count: 1, bundleId: SimulatorFixture.bundleId)[0]
        let path = "/transactions/\(p.transactionId)/plant"
        var (status, _) = try await f.admin("POST", path, body: .object(["kind": .string("sideways")]))
        XCTAssertEqual(status, 400)
        (status, _) = try await f.admin("POST", path, body: .object(["kind": .string("refund"), "side": .string("both")]))
        XCTAssertEqual(status, 400)
        (status, _) = try await f.admin("POST", path, body: .object(["kind": .string("expiresDate"), "side": .string("legacy"),
                                                                     "offsetSeconds": .string("60")]))
        XCTAssertEqual(status, 400)
        (status, _) = try await f.admin("POST", path, body: .object(["kind": .string("product"), "side": .string("legacy"),
                                                                     "productId": .string(p.productId)]))
        XCTAssertEqual(status, 400)
        (status, _) = try await f.admin("POST", "/transactions/4242/plant", body: .object(["kind": .string("onlyInLegacy")]))
        XCTAssertEqual(status, 404)
        XCTAssertEqual(f.sim.plantedDiscrepancies, [])
    }

    func testDiscrepancyJSONRoundTripsForEveryKind() throws {
        let all: [PlantedDiscrepancy] = [
            .refundOnlyInLegacy, .refundOnlyInServerAPI, .differentExpiresDate(.legacy, offsetSeconds: -5),
            .differentExpiresDate(.serverAPI, offsetSeconds: 7), .differentProduct(.legacy, productId: "x"),
            .differentProduct(.serverAPI, productId: "y"), .onlyInLegacy, .onlyInServerAPI,
        ]
        for d in all { XCTAssertEqual(try PlantedDiscrepancy(json: d.json), d) }
        XCTAssertEqual(all.map(\.changedGeneration),
                       [.legacy, .serverAPI, .legacy, .serverAPI, .legacy, .serverAPI, .serverAPI, .legacy])
    }
}
