import AppStoreSimulator
import AppleTrust
import Foundation
@testable import Gateway
import IAPCore
import TestSupport
import XCTest

/// App transactions on POST /verify and the `grandfathering` rule: buyers of the paid app keep the
/// listed products, over real HTTP to the simulator (Get App Transaction Info included).
final class GrandfatheringTests: XCTestCase {
    private static let wentFree = Int64(1_700_000_000_000)

    private func start() async throws -> GatewayE2E {
        try await GatewayE2E.start(self) {
            $0.grandfathering = AppPolicy.Grandfathering(productIds: [GatewayE2E.removeAds],
                                                         beforeOriginalApplicationVersion: "2.0")
        }
    }

    func testBuyerOfThePaidAppIsGrandfatheredOnceAndALaterDownloaderIsNot() async throws {
        let gw = try await start()
        gw.simulator.setAppPurchase(owner: "device-ida", bundleId: gw.bundleId, originalApplicationVersion: "1.4",
                                    originalPurchaseDate: Self.wentFree - 86_400_000)
        let laterId = gw.simulator.setAppPurchase(owner: "device-jo", bundleId: gw.bundleId, originalApplicationVersion: "2.1",
                                                  originalPurchaseDate: Self.wentFree + 86_400_000)
        let signed = try gw.simulator.signedAppTransaction(owner: "device-ida", bundleId: gw.bundleId)

        let buyer = try await gw.post("verify", ["account": .string("ida"), "signedAppTransaction": .string(signed)])
        let entitlements = try await gw.entitlements("ida")
        let later = try await gw.post("verify", ["account": .string("jo"), "appTransactionId": .string(laterId)])
        let laterEntitlements = try await gw.entitlements("jo")
        let sharedWithAnother = try await gw.post("verify", ["account": .string("mallory"), "signedAppTransaction": .string(signed)])

        XCTAssertEqual(buyer.status, 200, buyer.text)
        XCTAssertEqual(buyer.json["verdict"]?.stringValue, "granted")
        XCTAssertEqual(buyer.json["grandfathered"], .bool(true))
        XCTAssertEqual(buyer.json["appTransaction"]?["originalApplicationVersion"]?.stringValue, "1.4")
        XCTAssertEqual(buyer.json["entitlements"]?.arrayValue?.compactMap { $0["productId"]?.stringValue }, [GatewayE2E.removeAds])
        XCTAssertEqual(entitlements.compactMap { $0["productId"]?.stringValue }, [GatewayE2E.removeAds])
        XCTAssertEqual(later.status, 200, later.text)
        XCTAssertEqual(later.json["verdict"]?.stringValue, "notGranted")
        XCTAssertEqual(later.json["grandfathered"], .bool(false))
        XCTAssertEqual(laterEntitlements, [])
        XCTAssertEqual(sharedWithAnother.status, 409, sharedWithAnother.text)
        XCTAssertEqual(sharedWithAnother.errorCode, "TRANSACTION_BOUND_TO_OTHER_ACCOUNT")
    }

    func testForgedOrUnknownAppTransactionGrantsNothing() async throws {
        let gw = try await start()
        gw.simulator.setAppPurchase(owner: "device-kim", bundleId: gw.bundleId, originalApplicationVersion: "2.5",
                                    originalPurchaseDate: Self.wentFree + 1)
        let signed = try gw.simulator.signedAppTransaction(owner: "device-kim", bundleId: gw.bundleId)
        // The same signature over a payload that claims the paid version.
        var parts = signed.split(separator: ".").map(String.init)
        let payload = try Base64URL.decode(parts[1])
        let forgedPayload = String(decoding: payload, as: UTF8.self).replacingOccurrences(of: "\"2.5\"", with: "\"1.0\"")
        parts[1] = Base64URL.encode(Array(forgedPayload.utf8))

        let forged = try await gw.post("verify", ["account": .string("kim"), "signedAppTransaction": .string(parts.joined(separator: "."))])
        let unknown = try await gw.post("verify", ["account": .string("kim"), "appTransactionId": .string("999999999")])
        let kimEntitlements = try await gw.entitlements("kim")

        XCTAssertEqual(forged.status, 422, forged.text)
        XCTAssertEqual(forged.errorCode, "INVALID_SIGNATURE")
        XCTAssertEqual(unknown.status, 422, unknown.text)
        XCTAssertEqual(unknown.errorCode, "TRANSACTION_NOT_FOUND")
        XCTAssertEqual(kimEntitlements, [])
    }

    func testRuleComparesVersionsAndDatesAndFailsClosed() {
        func app(_ version: String?, _ date: Int64?) -> CanonicalAppTransaction {
            var a = CanonicalAppTransaction(bundleId: "b", source: "serverAPI", mappingVersion: "serverAPI/v1")
            a.originalApplicationVersion = version
            a.originalPurchaseDate = date
            return a
        }
        let byVersion = AppPolicy.Grandfathering(productIds: ["p"], beforeOriginalApplicationVersion: "2.0")
        let both = AppPolicy.Grandfathering(productIds: ["p"], beforeOriginalApplicationVersion: "2.0",
                                            beforeOriginalPurchaseDate: Self.wentFree)

        XCTAssertTrue(byVersion.grandfathers(app("1.9.9", nil)))
        XCTAssertTrue(byVersion.grandfathers(app("1.10", nil)))
        XCTAssertFalse(byVersion.grandfathers(app("2", nil)))
        XCTAssertFalse(byVersion.grandfathers(app("10.0", nil)))
        XCTAssertFalse(byVersion.grandfathers(app("1.0b3", nil)))
        XCTAssertFalse(byVersion.grandfathers(app(nil, 1)))
        XCTAssertTrue(both.grandfathers(app("1.0", Self.wentFree - 1)))
        XCTAssertFalse(both.grandfathers(app("1.0", Self.wentFree)))
        XCTAssertFalse(both.grandfathers(app("1.0", nil)))
    }
}
