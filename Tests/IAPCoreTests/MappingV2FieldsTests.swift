import Foundation
import IAPCore
import IAPMapping
import XCTest

/// Issue 13 item 1: serverAPI/v2 keeps every member of today's payloads under Apple's names, v1
/// still loads and its records keep their version, and what Apple adds later still decodes.
final class MappingV2FieldsTests: XCTestCase {
    typealias S = MappingTestSupport

    private static let transaction = """
        {"transactionId": "2000000900000001", "originalTransactionId": "2000000900000001", "productId": "monthly.12",
         "purchaseDate": 1780000000000, "expiresDate": 1782592000000, "signedDate": 1780000000001,
         "appTransactionId": "704289572311026121", "offerPeriod": "P1M",
         "revocationDate": 1781000000000, "revocationReason": 0, "revocationType": "REFUND_PRORATED",
         "revocationPercentage": 45000, "billingPlanType": "MONTHLY",
         "commitmentInfo": {"billingPeriodNumber": 2, "totalBillingPeriods": 12, "commitmentExpiresDate": 1811536000000,
                            "commitmentPrice": 119880},
         "advancedCommerceInfo": {"requestReferenceId": "r-1", "items": [{"SKU": "sku.1", "price": 990}], "futureMember": true}}
        """

    private static let renewal = """
        {"originalTransactionId": "2000000900000001", "autoRenewStatus": 1, "signedDate": 1780000000001,
         "appTransactionId": "704289572311026121", "appAccountToken": "7e3fb20b-4cdb-47cc-936d-99d65f608138",
         "offerPeriod": "P3M", "eligibleWinBackOfferIds": ["winback.1", "winback.2"], "renewalBillingPlanType": "MONTHLY",
         "commitmentInfo": {"commitmentRenewalDate": 1811536000000, "commitmentAutoRenewStatus": 1},
         "advancedCommerceInfo": {"consistencyToken": "c-1"}}
        """

    private func normalizer(_ version: String) throws -> ServerAPINormalizer {
        try ServerAPINormalizer(XCTUnwrap(S.shipped().version(source: "serverAPI", version)))
    }

    func testV2IsTheLatestAndV1StillLoads() throws {
        let set = try S.shipped()
        XCTAssertEqual(set.versions(source: "serverAPI"), ["v1", "v2"])
        XCTAssertEqual(set.latest(source: "serverAPI")?.id, "serverAPI/v2")
        XCTAssertNotNil(set.file(id: "serverAPI/v1"), "records stored by v1 stay explainable")
    }

    func testV2MapsEveryNewTransactionMemberUnderApplesNames() throws {
        let mapped = try normalizer("v2").normalizeReporting(transaction: S.json(Self.transaction))
        XCTAssertEqual(mapped.unmappedFields, [])
        let t = mapped.record
        XCTAssertEqual(t.mappingVersion, "serverAPI/v2")
        XCTAssertEqual(t.appTransactionId, "704289572311026121")
        XCTAssertEqual(t.offerPeriod, "P1M")
        XCTAssertEqual(t.revocationType, .refundProrated)
        XCTAssertEqual(t.revocationPercentage, 45000)
        XCTAssertEqual(t.billingPlanType, .monthly)
        XCTAssertEqual(t.commitmentExpiresDate, 1_811_536_000_000)
        XCTAssertEqual(t.commitmentInfo?["totalBillingPeriods"], .int(12))
        XCTAssertEqual(t.advancedCommerceInfo?["futureMember"], .bool(true), "kept whole, members Apple adds included")
        let json = t.jsonValue
        XCTAssertEqual(json["revocationType"], "REFUND_PRORATED")
        XCTAssertEqual(json["revocationPercentage"], .int(45000))
        XCTAssertEqual(json["commitmentInfo"]?["billingPeriodNumber"], .int(2))
        XCTAssertEqual(json["advancedCommerceInfo"]?["items"]?.arrayValue?.count, 1)
    }

    func testV2MapsEveryNewRenewalMember() throws {
        let mapped = try normalizer("v2").normalizeReporting(renewalInfo: S.json(Self.renewal))
        XCTAssertEqual(mapped.unmappedFields, [])
        let r = mapped.record
        XCTAssertEqual(r.appTransactionId, "704289572311026121")
        XCTAssertEqual(r.appAccountToken, "7e3fb20b-4cdb-47cc-936d-99d65f608138")
        XCTAssertEqual(r.offerPeriod, "P3M")
        XCTAssertEqual(r.eligibleWinBackOfferIds, ["winback.1", "winback.2"])
        XCTAssertEqual(r.renewalBillingPlanType, .monthly)
        XCTAssertEqual(r.commitmentInfo?["commitmentRenewalDate"], .int(1_811_536_000_000))
        XCTAssertEqual(r.advancedCommerceInfo?["consistencyToken"], "c-1")
        XCTAssertEqual(r.jsonValue["eligibleWinBackOfferIds"], .array(["winback.1", "winback.2"]))
    }

    func testV1RecordsKeepTheirVersionAndOmitWhatV1Ignored() throws {
        let t = try normalizer("v1").normalize(transaction: S.json(Self.transaction))
        XCTAssertEqual(t.mappingVersion, "serverAPI/v1")
        XCTAssertNil(t.appTransactionId)
        XCTAssertNil(t.revocationType)
        XCTAssertEqual(t.revocationDate, 1_781_000_000_000, "what v1 mapped, it still maps")
    }

    func testUnknownMembersAndEnumValuesKeepDecoding() throws {
        let mapped = try normalizer("v2").normalizeReporting(transaction: S.json("""
            {"transactionId": "1", "productId": "p", "revocationType": "REFUND_SOMETHING_NEW", "billingPlanType": "WEEKLY",
             "commitmentInfo": {"commitmentExpiresDate": 1811536000000, "newMember": [1, 2]}, "memberOf2027": {"x": 1}}
            """))
        XCTAssertEqual(mapped.record.revocationType?.rawValue, "REFUND_SOMETHING_NEW")
        XCTAssertEqual(mapped.record.billingPlanType?.rawValue, "WEEKLY")
        XCTAssertEqual(mapped.record.commitmentInfo?["newMember"], .array([1, 2]))
        XCTAssertEqual(mapped.unmappedFields, ["transaction.memberOf2027"], "listed, never refused")
    }

    func testNewMembersOfTheWrongTypeAreRefusedWithTheirPath() throws {
        let v2 = try normalizer("v2")
        for (body, path) in [
            (#"{"transactionId": "1", "productId": "p", "revocationPercentage": "45000"}"#, "transaction.revocationPercentage"),
            (#"{"transactionId": "1", "productId": "p", "commitmentInfo": [1]}"#, "transaction.commitmentInfo"),
        ] {
            let error = S.error { _ = try v2.normalize(transaction: S.json(body)) }
            XCTAssertEqual(error?.code, .invalidFieldType, body)
            XCTAssertTrue(error?.message.contains(path) == true, error?.message ?? "")
        }
        let error = S.error {
            _ = try v2.normalize(renewalInfo: S.json(#"{"originalTransactionId": "1", "eligibleWinBackOfferIds": ["a", 2]}"#))
        }
        XCTAssertEqual(error?.code, .invalidFieldType)
    }

    /// The ledger stores canonical records with JSONEncoder: the kept-whole members survive a
    /// round trip exactly (integers stay integers), and a record stored before v2 still decodes.
    func testCanonicalRecordsRoundTripThroughStorageAndOldRecordsStillDecode() throws {
        let t = try normalizer("v2").normalize(transaction: S.json(Self.transaction))
        let decoded = try JSONDecoder().decode(CanonicalTransaction.self, from: JSONEncoder().encode(t))
        XCTAssertEqual(decoded, t)
        let stored = #"{"transactionId":"1","productId":"p","source":"serverAPI","mappingVersion":"serverAPI/v1"}"#
        let old = try JSONDecoder().decode(CanonicalTransaction.self, from: Data(stored.utf8))
        XCTAssertEqual(old.mappingVersion, "serverAPI/v1")
        XCTAssertNil(old.commitmentInfo)
    }

    func testEveryNewFieldIsADeclaredDifferenceSoComparisonsDoNotReportIt() throws {
        let set = try S.shipped()
        let known = KnownDifferences(mappingFiles: [try XCTUnwrap(set.latest(source: "verifyReceipt")),
                                                    try XCTUnwrap(set.latest(source: "serverAPI"))])
        XCTAssertTrue(known.transaction.isSuperset(of: ["appTransactionId", "offerPeriod", "revocationType", "revocationPercentage",
                                                        "billingPlanType", "commitmentInfo", "advancedCommerceInfo"]))
        XCTAssertTrue(known.renewal.isSuperset(of: ["appTransactionId", "appAccountToken", "offerPeriod", "eligibleWinBackOfferIds",
                                                    "renewalBillingPlanType", "commitmentInfo", "advancedCommerceInfo"]))
    }
}
