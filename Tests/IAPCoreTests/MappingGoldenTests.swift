import Foundation
import IAPMapping
import XCTest
import IAPCore

/// The same purchases, told once by verifyReceipt and once by the Server API, must normalise to the
/// same canonical records apart from `source`, `mappingVersion` and the fields the shipped mapping
/// files declare as known differences.
final class MappingGoldenTests: XCTestCase {
    typealias S = MappingTestSupport

    private var legacy: LegacyNormalized!
    private var serverTransactions: [CanonicalTransaction] = []
    private var serverRenewals: [CanonicalRenewal] = []
    private var serverApp: CanonicalAppTransaction!
    private var legacyFile: MappingFile!
    private var serverFile: MappingFile!

    override func setUpWithError() throws {
        let set = try S.shipped()
        legacyFile = try XCTUnwrap(set.latest(source: "verifyReceipt"))
        serverFile = try XCTUnwrap(set.latest(source: "serverAPI"))
        legacy = try LegacyReceiptNormalizer(legacyFile).normalize(verifyReceiptResponse: S.fixture("golden-verifyReceipt.json"))
        let server = try S.fixture("golden-serverAPI.json")
        let normalizer = try ServerAPINormalizer(serverFile)
        for t in server["transactions"]?.arrayValue ?? [] {
            let mapped = try normalizer.normalizeReporting(transaction: t)
            XCTAssertEqual(mapped.unmappedFields, [])
            serverTransactions.append(mapped.record)
        }
        serverRenewals = try (server["renewalInfo"]?.arrayValue ?? []).map { try normalizer.normalize(renewalInfo: $0) }
        serverApp = try normalizer.normalize(appTransaction: XCTUnwrap(server["appTransaction"]))
    }

    /// The record as a JSON dictionary without the fields allowed to differ.
    private func comparable<T: Encodable>(_ record: T, ignoring: Set<String>) throws -> NSDictionary {
        let object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(record)) as! [String: Any]
        return object.filter { !ignoring.contains($0.key) && $0.key != "source" && $0.key != "mappingVersion" } as NSDictionary
    }

    private func knownDifferences(_ legacyKind: String, _ serverKind: String) -> Set<String> {
        Set(legacyFile.knownDifferences(kind: legacyKind).keys).union(serverFile.knownDifferences(kind: serverKind).keys)
    }

    func testTransactionsAgreeApartFromDeclaredDifferences() throws {
        let ignoring = knownDifferences("in_app", "transaction")
        XCTAssertEqual(ignoring, ["appAppleId", "type", "signedDate", "offerDiscountType", "storefront",
                                  "transactionReason", "currency", "price",
                                  // serverAPI/v2: fields newer than verifyReceipt
                                  "appTransactionId", "offerPeriod", "revocationType", "revocationPercentage",
                                  "billingPlanType", "commitmentInfo", "advancedCommerceInfo"])
        XCTAssertEqual(legacy.transactions.map(\.transactionId), ["2000000100000001", "2000000100000003", "2000000100000002"])
        let server = Dictionary(uniqueKeysWithValues: serverTransactions.map { ($0.transactionId, $0) })
        XCTAssertEqual(server.count, 3)
        for l in legacy.transactions {
            let s = try XCTUnwrap(server[l.transactionId])
            XCTAssertEqual(try comparable(l, ignoring: ignoring), try comparable(s, ignoring: ignoring), l.transactionId)
            XCTAssertEqual([l.source, l.mappingVersion], ["verifyReceipt", "verifyReceipt/v1"])
            XCTAssertEqual([s.source, s.mappingVersion], ["serverAPI", "serverAPI/v2"])
        }
        XCTAssertEqual(legacy.unmappedFields, [])
    }

    /// Guards the comparison above against passing on empty records, and checks the legacy-side
    /// derivations that the known-difference list would otherwise hide.
    func testLegacyRecordsCarryTheDerivedFacts() throws {
        let byId = Dictionary(uniqueKeysWithValues: legacy.transactions.map { ($0.transactionId, $0) })
        let trial = try XCTUnwrap(byId["2000000100000001"])
        XCTAssertEqual(trial.offerType, .introductory)
        XCTAssertEqual(trial.offerDiscountType, .freeTrial)
        XCTAssertEqual(trial.offerDiscountType, serverTransactions[0].offerDiscountType)
        XCTAssertEqual(trial.type, .autoRenewable)
        XCTAssertEqual(trial.expiresDate, 1_700_604_800_000)
        XCTAssertEqual(trial.bundleId, "com.example.golden")
        XCTAssertEqual(trial.appAppleId, 1_234_567_890)
        XCTAssertEqual(trial.environment, .sandbox)
        XCTAssertEqual(trial.subscriptionGroupIdentifier, "21000001")
        let refunded = try XCTUnwrap(byId["2000000100000002"])
        XCTAssertEqual(refunded.revocationDate, 1_701_000_000_000)
        XCTAssertEqual(refunded.revocationReason, .appIssue)
        XCTAssertNil(refunded.offerType)
        let lifetime = try XCTUnwrap(byId["2000000100000003"])
        XCTAssertNil(lifetime.type, "legacy cannot tell a non-consumable from a consumable")
        XCTAssertEqual(lifetime.quantity, 1)
        XCTAssertEqual(lifetime.appAccountToken, "7e3fb20b-4cdb-47cc-936d-99d65f608138")
        XCTAssertEqual(legacy.status, 0)
        XCTAssertEqual(legacy.environment, .sandbox)
    }

    func testLatestReceiptInfoWinsOverTheStaleInAppCopy() throws {
        // The receipt's in_app copy of ...0002 has no cancellation; latest_receipt_info has it.
        let refunded = try XCTUnwrap(legacy.transactions.first { $0.transactionId == "2000000100000002" })
        XCTAssertNotNil(refunded.revocationDate)
        XCTAssertEqual(legacy.transactions.filter { $0.transactionId == "2000000100000002" }.count, 1)
    }

    func testRenewalsAgreeApartFromDeclaredDifferences() throws {
        let ignoring = knownDifferences("pending_renewal_info", "renewalInfo")
        XCTAssertEqual(ignoring, ["offerDiscountType", "signedDate", "renewalDate", "renewalPrice", "currency",
                                  // serverAPI/v2: fields newer than verifyReceipt, and the renewal's own token
                                  "appTransactionId", "appAccountToken", "offerPeriod", "eligibleWinBackOfferIds",
                                  "renewalBillingPlanType", "commitmentInfo", "advancedCommerceInfo"])
        XCTAssertEqual(legacy.renewals.count, 1)
        XCTAssertEqual(serverRenewals.count, 1)
        XCTAssertEqual(try comparable(legacy.renewals[0], ignoring: ignoring), try comparable(serverRenewals[0], ignoring: ignoring))
        XCTAssertEqual(legacy.renewals[0].autoRenewStatus, .off)
        XCTAssertEqual(legacy.renewals[0].expirationIntent, .customerCancelled)
        XCTAssertEqual(legacy.renewals[0].isInBillingRetryPeriod, false)
        XCTAssertEqual(legacy.renewals[0].environment, .sandbox)
    }

    func testAppTransactionsAgreeApartFromDeclaredDifferences() throws {
        let ignoring = knownDifferences("receipt", "appTransaction")
        XCTAssertEqual(ignoring, ["requestDate", "expirationDate", "deviceVerification", "deviceVerificationNonce",
                                  "appTransactionId", "originalPlatform"])
        let app = try XCTUnwrap(legacy.appTransaction)
        XCTAssertEqual(try comparable(app, ignoring: ignoring), try comparable(serverApp!, ignoring: ignoring))
        XCTAssertEqual(app.receiptType, .sandbox, "ProductionSandbox maps to Sandbox")
        XCTAssertEqual(app.appAppleId, 1_234_567_890)
        XCTAssertEqual(app.receiptCreationDate, 1_700_700_000_000)
        XCTAssertEqual(app.requestDate, 1_700_700_001_000)
        XCTAssertEqual(app.mappingVersion, "verifyReceipt/v1")
    }
}
