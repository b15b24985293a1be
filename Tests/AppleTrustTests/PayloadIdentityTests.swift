import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// bundleId and appAppleId are enforced wherever a verified payload states them, including kinds
/// whose Apple model does not name them (renewal info) and inner notification JWS.
final class PayloadIdentityTests: XCTestCase {
    func testRenewalInfoStatingAnotherBundleIsRefused() throws {
        let jws = try Fixture.signer.sign(Fixture.renewalInfo(["bundleId": "com.attacker.app"]))
        assertRefused(.bundleIdMismatch) { try Fixture.verifier().verifyAndDecodeRenewalInfo(jws) }
    }

    func testRenewalInfoStatingAnotherAppAppleIdIsRefused() throws {
        let jws = try Fixture.signer.sign(Fixture.renewalInfo(["appAppleId": .int(42)]))
        assertRefused(.appAppleIdMismatch) { try Fixture.verifier().verifyAndDecodeRenewalInfo(jws) }
    }

    func testRenewalInfoWithABundleIdOfTheWrongTypeIsAnInvalidField() throws {
        let jws = try Fixture.signer.sign(Fixture.renewalInfo(["bundleId": 7]))
        assertRefused(.invalidFieldType) { try Fixture.verifier().verifyAndDecodeRenewalInfo(jws) }
    }

    func testRenewalInfoStatingThisAppIsAccepted() throws {
        let jws = try Fixture.signer.sign(Fixture.renewalInfo(["bundleId": .string(Fixture.bundleId), "appAppleId": .int(Fixture.appAppleId)]))
        XCTAssertEqual(try Fixture.verifier().verifyAndDecodeRenewalInfo(jws).originalTransactionId, "2000000000000001")
    }

    func testTransactionStatingAnotherAppAppleIdIsRefused() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction(["appAppleId": .int(42)]))
        assertRefused(.appAppleIdMismatch) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
    }

    func testInnerRenewalInfoForAnotherBundleIsInconsistent() throws {
        let transaction = try Fixture.signer.sign(Fixture.transaction())
        let renewal = try Fixture.signer.sign(Fixture.renewalInfo(["bundleId": "com.attacker.app"]))
        let n = try Fixture.signer.sign(Fixture.notification(data: Fixture.notificationData(transaction: transaction, renewal: renewal)))
        assertRefused(.notificationInconsistent) { try Fixture.verifier().verifyAndDecodeNotification(n) }
    }

    func testInnerTransactionForAnotherAppThanTheEnvelopeIsInconsistent() throws {
        let transaction = try Fixture.signer.sign(Fixture.transaction(["appAppleId": .int(42)]))
        let n = try Fixture.signer.sign(Fixture.notification(data: Fixture.notificationData(transaction: transaction)))
        assertRefused(.notificationInconsistent) { try Fixture.verifier().verifyAndDecodeNotification(n) }
    }

    func testInnerTransactionForAnotherAppUnderAnEnvelopeWithoutAppIdIsAMismatch() throws {
        let transaction = try Fixture.signer.sign(Fixture.transaction(["appAppleId": .int(42)]))
        var data = Fixture.notificationData(transaction: transaction)
        data.removeValue(forKey: "appAppleId")
        let n = try Fixture.signer.sign(Fixture.notification(data: data))
        assertRefused(.appAppleIdMismatch) { try Fixture.verifier().verifyAndDecodeNotification(n) }
    }
}
