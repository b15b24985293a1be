@testable import AppStoreSimulator
import AppleTrust
import Foundation
@testable import Gateway
import IAPConfig
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

    func testReceiptOfThePaidAppGrandfathersOneAccountPerDownload() async throws {
        let gw = try await start()
        gw.simulator.setAppPurchase(owner: "device-ida", bundleId: gw.bundleId, originalApplicationVersion: "1.4",
                                    originalPurchaseDate: Self.wentFree - 86_400_000)
        gw.simulator.setAppPurchase(owner: "device-jo", bundleId: gw.bundleId, originalApplicationVersion: "2.1",
                                    originalPurchaseDate: Self.wentFree + 86_400_000)
        // A receipt listing no in-app purchase: the paid download is all it proves.
        let receipt = try gw.simulator.receipt(owner: "device-ida", bundleId: gw.bundleId)

        let buyer = try await gw.verifyReceipt(receipt, account: "ida")
        let again = try await gw.verifyReceipt(try gw.simulator.receipt(owner: "device-ida", bundleId: gw.bundleId), account: "ida")
        let sharedWithAnother = try await gw.verifyReceipt(receipt, account: "mallory")
        let later = try await gw.verifyReceipt(try gw.simulator.receipt(owner: "device-jo", bundleId: gw.bundleId), account: "jo")
        let idaEntitlements = try await gw.entitlements("ida")
        let malloryEntitlements = try await gw.entitlements("mallory")

        XCTAssertEqual(buyer.status, 200, buyer.text)
        XCTAssertEqual(buyer.json["verdict"]?.stringValue, "granted")
        XCTAssertEqual(buyer.json["grandfathered"], .bool(true))
        XCTAssertEqual(idaEntitlements.compactMap { $0["productId"]?.stringValue }, [GatewayE2E.removeAds])
        XCTAssertEqual(idaEntitlements.first?["source"]?.stringValue, "grandfathering")
        let key = try XCTUnwrap(idaEntitlements.first?["originalTransactionId"]?.stringValue)
        XCTAssertTrue(key.hasPrefix("receiptDownload:") && key.hasSuffix(":\(GatewayE2E.removeAds)"), key)
        XCTAssertFalse(key.hasPrefix("receiptDownload:0:"), key)
        XCTAssertEqual(again.status, 200, again.text)
        XCTAssertEqual(again.json["grandfathered"], .bool(true))
        XCTAssertEqual(sharedWithAnother.status, 409, sharedWithAnother.text)
        XCTAssertEqual(sharedWithAnother.errorCode, "TRANSACTION_BOUND_TO_OTHER_ACCOUNT")
        XCTAssertEqual(malloryEntitlements, [])
        // Bought after the cut and no in-app purchase: nothing to grant, refused as before.
        XCTAssertEqual(later.status, 422, later.text)
        XCTAssertEqual(later.errorCode, "NO_TRANSACTIONS")
    }

    func testReceiptWithoutADownloadIdGrandfathersNobody() async throws {
        let gw = try await start()
        // No app download recorded: the receipt states version "1.0" (before the cut) but
        // verifyReceipt's download_id is 0, as in Apple's sandbox answers: nothing to bind to.
        _ = try gw.buy(owner: "device-lee")
        let receipt = try gw.simulator.receipt(owner: "device-lee", bundleId: gw.bundleId)

        let answer = try await gw.verifyReceipt(receipt, account: "lee")
        let entitlements = try await gw.entitlements("lee")

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.json["grandfathered"], .bool(false))
        XCTAssertEqual(entitlements.compactMap { $0["productId"]?.stringValue }, [GatewayE2E.monthly])
    }

    func testCompareRoutingSetsTheReceiptsAppFactsBesideTheAppTransactions() async throws {
        let gw = try await GatewayE2E.start(self) {
            $0.receiptRouting = "compare"
            $0.grandfathering = AppPolicy.Grandfathering(productIds: [GatewayE2E.removeAds],
                                                         beforeOriginalApplicationVersion: "2.0")
        }
        for owner in ["device-una", "device-vic"] {
            gw.simulator.setAppPurchase(owner: owner, bundleId: gw.bundleId, originalApplicationVersion: "1.4",
                                        originalPurchaseDate: Self.wentFree - 86_400_000)
            _ = try gw.buy(owner: owner)
        }
        let agreeing = try gw.simulator.receipt(owner: "device-una", bundleId: gw.bundleId)
        let stale = try gw.simulator.receipt(owner: "device-vic", bundleId: gw.bundleId)
        // Apple's record of vic's download changes after the receipt was signed.
        gw.simulator.setAppPurchase(owner: "device-vic", bundleId: gw.bundleId, originalApplicationVersion: "2.1",
                                    originalPurchaseDate: Self.wentFree + 86_400_000)

        let una = try await gw.verifyReceipt(agreeing, account: "una")
        let vic = try await gw.verifyReceipt(stale, account: "vic")

        XCTAssertEqual(una.status, 200, una.text)
        XCTAssertEqual(una.json["comparison"]?["agreed"], .bool(true), una.text)
        XCTAssertEqual(vic.status, 200, vic.text)
        XCTAssertEqual(vic.json["comparison"]?["agreed"], .bool(false), vic.text)
        let differences = vic.json["comparison"]?["differences"]?.arrayValue ?? []
        XCTAssertEqual(differences.compactMap { $0["field"]?.stringValue },
                       ["appTransaction.originalApplicationVersion", "appTransaction.originalPurchaseDate"], vic.text)
        XCTAssertEqual(differences.first?["legacyValue"]?.stringValue, "\"1.4\"")
        XCTAssertEqual(differences.first?["serverAPIValue"]?.stringValue, "\"2.1\"")
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
