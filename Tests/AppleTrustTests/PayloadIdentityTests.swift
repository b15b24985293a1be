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

    /// Absent is never read as "this app": a transaction always names its bundle.
    func testTransactionNamingNoBundleIsABundleMismatch() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction(["bundleId": .null]))
        assertRefused(.bundleIdMismatch) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
    }

    func testInnerTransactionNamingNoBundleIsABundleMismatch() throws {
        let transaction = try Fixture.signer.sign(Fixture.transaction(["bundleId": .null]))
        let n = try Fixture.signer.sign(Fixture.notification(data: Fixture.notificationData(transaction: transaction)))
        assertRefused(.bundleIdMismatch) { try Fixture.verifier().verifyAndDecodeNotification(n) }
    }

    /// Apple assigns app ids in Production only: outside it 0 is no statement, any other id must be the app's.
    func testSandboxTransactionStatingAppIdZeroIsAccepted() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction(["appAppleId": .int(0)]))
        XCTAssertEqual(try Fixture.verifier().verifyAndDecodeTransaction(jws).transactionId, "2000000000000001")
    }

    func testProductionTransactionStatingAppIdZeroIsAMismatch() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction(["appAppleId": .int(0), "environment": "Production"]))
        assertRefused(.appAppleIdMismatch) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
    }

    /// A Production notification names its app id, as Apple's verifier requires.
    func testProductionNotificationNamingNoAppIdIsAMismatch() throws {
        var data = Fixture.notificationData(transaction: nil, environment: "Production")
        data.removeValue(forKey: "appAppleId")
        let n = try Fixture.signer.sign(Fixture.notification(data: data))
        assertRefused(.appAppleIdMismatch) { try Fixture.verifier().verifyAndDecodeNotification(n) }
        XCTAssertNoThrow(try Fixture.verifier(appAppleId: nil).verifyAndDecodeNotification(n), "an identity without an app id checks none")
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
