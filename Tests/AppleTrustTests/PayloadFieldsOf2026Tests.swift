import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// Issue 13 item 1: the typed models know the members of API 1.19–1.21, signed and verified like
/// every other, with Apple's JSON types enforced and unknown values kept.
final class PayloadFieldsOf2026Tests: XCTestCase {
    func testATransactionDecodesRevocationTypePercentageBillingPlanAndCommitment() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction([
            "revocationDate": .int(Fixture.nowMs - 500), "revocationReason": 0, "revocationType": "REFUND_PRORATED",
            "revocationPercentage": 45000, "billingPlanType": "MONTHLY", "appTransactionId": "704289572311026121",
            "commitmentInfo": .object(["commitmentExpiresDate": .int(Fixture.nowMs + 86_400_000), "totalBillingPeriods": 12]),
            "advancedCommerceInfo": .object(["requestReferenceId": "r-1"]),
        ]))
        let t = try Fixture.verifier().verifyAndDecodeTransaction(jws)
        XCTAssertEqual(t.revocationType, .refundProrated)
        XCTAssertEqual(t.revocationPercentage, 45000)
        XCTAssertEqual(t.billingPlanType, .monthly)
        XCTAssertEqual(t.commitmentInfo?["totalBillingPeriods"], .int(12))
        XCTAssertEqual(t.advancedCommerceInfo?["requestReferenceId"], "r-1")
    }

    func testARenewalInfoDecodesWinBackOffersBillingPlanAndCommitment() throws {
        let jws = try Fixture.signer.sign(Fixture.renewalInfo([
            "eligibleWinBackOfferIds": .array(["wb.1"]), "renewalBillingPlanType": "A_PLAN_OF_2027",
            "commitmentInfo": .object(["commitmentRenewalDate": .int(Fixture.nowMs + 86_400_000)]),
        ]))
        let r = try Fixture.verifier().verifyAndDecodeRenewalInfo(jws)
        XCTAssertEqual(r.eligibleWinBackOfferIds, ["wb.1"])
        XCTAssertEqual(r.renewalBillingPlanType?.rawValue, "A_PLAN_OF_2027", "an unknown value is kept, not refused")
        XCTAssertNotNil(r.commitmentInfo?["commitmentRenewalDate"])
    }

    func testNewMembersOfTheWrongJSONTypeAreRefused() throws {
        for overrides: [String: JSONValue] in [["revocationPercentage": "45000"], ["commitmentInfo": .array([])],
                                               ["billingPlanType": 1]] {
            let jws = try Fixture.signer.sign(Fixture.transaction(overrides))
            assertRefused(.invalidFieldType) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
        }
        let jws = try Fixture.signer.sign(Fixture.renewalInfo(["eligibleWinBackOfferIds": .array([1])]))
        assertRefused(.invalidFieldType) { try Fixture.verifier().verifyAndDecodeRenewalInfo(jws) }
    }
}
