import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// V2 notifications: the envelope AND every inner JWS are verified and must agree.
final class NotificationTests: XCTestCase {
    func sign(_ v: JSONValue) throws -> String { try Fixture.signer.sign(v) }

    func testNotificationWithGenuineInnerTransactionAndRenewalVerifiesBoth() throws {
        let t = try sign(Fixture.transaction())
        let r = try sign(Fixture.renewalInfo())
        let n = try Fixture.verifier().verifyAndDecodeNotification(try sign(Fixture.notification(data: Fixture.notificationData(transaction: t, renewal: r))))
        XCTAssertEqual(n.notificationType.rawValue, "DID_RENEW")
        XCTAssertEqual(n.verifiedTransaction?.transactionId, "2000000000000001")
        XCTAssertEqual(n.verifiedRenewalInfo?.autoRenewStatus, .on)
        XCTAssertEqual(Set(n.innerPayloads.keys), ["signedTransactionInfo", "signedRenewalInfo"])
    }

    func testGenuineEnvelopeWithForgedInnerTransactionIsRefused() throws {
        let stranger = try TestPKI.CertificateAuthority.make()
        let forged = try stranger.signer(leaf: stranger.issueLeaf(validity: .around(Fixture.now, days: 10))).sign(Fixture.transaction())
        let outer = try sign(Fixture.notification(data: Fixture.notificationData(transaction: forged)))
        assertRefused(.untrustedRoot) { try Fixture.verifier().verifyAndDecodeNotification(outer) }
    }

    func testInnerTransactionWithTamperedPayloadIsRefused() throws {
        let t = try sign(Fixture.transaction())
        let tampered = replacingSegment(t, 1, with: Base64URL.encode(Array(Fixture.transaction(["price": 1]).jsonText.utf8)))
        let outer = try sign(Fixture.notification(data: Fixture.notificationData(transaction: tampered)))
        assertRefused(.invalidSignature) { try Fixture.verifier().verifyAndDecodeNotification(outer) }
    }

    func testInnerTransactionForAnotherBundleIsInconsistent() throws {
        let t = try sign(Fixture.transaction(["bundleId": "com.example.other"]))
        let outer = try sign(Fixture.notification(data: Fixture.notificationData(transaction: t)))
        assertRefused(.notificationInconsistent) { try Fixture.verifier().verifyAndDecodeNotification(outer) }
    }

    func testInnerTransactionFromAnotherEnvironmentIsInconsistent() throws {
        let t = try sign(Fixture.transaction(["environment": "Production"]))
        let outer = try sign(Fixture.notification(data: Fixture.notificationData(transaction: t)))
        assertRefused(.notificationInconsistent) { try Fixture.verifier().verifyAndDecodeNotification(outer) }
    }

    func testRenewalInfoInTheTransactionSlotIsTheWrongKind() throws {
        let r = try sign(Fixture.renewalInfo())
        let outer = try sign(Fixture.notification(data: Fixture.notificationData(transaction: r)))
        assertRefused(.wrongPayloadKind) { try Fixture.verifier().verifyAndDecodeNotification(outer) }
    }

    func testDataAndSummaryThatDisagreeAreInconsistent() throws {
        var body = Fixture.notification(data: Fixture.notificationData(transaction: nil)).objectValue!
        body["summary"] = .object(["bundleId": "com.example.other", "environment": "Sandbox", "requestIdentifier": "r1"])
        assertRefused(.notificationInconsistent) { try Fixture.verifier().verifyAndDecodeNotification(try sign(.object(body))) }
    }

    func testUnknownNotificationTypeAndSubtypeDecodeWithRawKept() throws {
        var body = Fixture.notification(type: "SOMETHING_NEW", data: Fixture.notificationData(transaction: nil)).objectValue!
        body["subtype"] = "BRAND_NEW"
        body["futureField"] = .object(["x": 1])
        let n = try Fixture.verifier().verifyAndDecodeNotification(try sign(.object(body)))
        XCTAssertEqual(n.notificationType.rawValue, "SOMETHING_NEW")
        XCTAssertEqual(n.notificationType.isKnown, false)
        XCTAssertEqual(n.subtype?.rawValue, "BRAND_NEW")
        XCTAssertEqual(n.raw["futureField"], .object(["x": 1]))
    }

    func testNotificationForAnotherBundleIsRefused() throws {
        var data = Fixture.notificationData(transaction: nil)
        data["bundleId"] = "com.example.other"
        assertRefused(.bundleIdMismatch) { try Fixture.verifier().verifyAndDecodeNotification(try sign(Fixture.notification(data: data))) }
    }
}

final class ExternalPurchaseTokenNotificationTests: XCTestCase {
    func notification(token: [String: JSONValue]) throws -> String {
        try Fixture.signer.sign(.object([
            "notificationType": "EXTERNAL_PURCHASE_TOKEN", "subtype": "UNREPORTED",
            "notificationUUID": "6d0f8a6c-0000-4000-8000-000000000002", "version": "2.0",
            "signedDate": .int(Fixture.nowMs - 500), "externalPurchaseToken": .object(token),
        ]))
    }

    func testTokenWithoutAnIdIsMissingAFieldNotProduction() throws {
        let jws = try notification(token: ["tokenCreationDate": .int(Fixture.nowMs - 1_000), "appAppleId": .int(Fixture.appAppleId),
                                           "bundleId": .string(Fixture.bundleId)])
        assertRefused(.missingField) { try Fixture.verifier().verifyAndDecodeNotification(jws) }
    }

    func testSandboxPrefixedTokenIsSandbox() throws {
        let jws = try notification(token: ["externalPurchaseId": "SANDBOX_b2158121-7af9-49d4-9561-1f588205523e",
                                           "tokenCreationDate": .int(Fixture.nowMs - 1_000), "appAppleId": .int(Fixture.appAppleId),
                                           "bundleId": .string(Fixture.bundleId)])
        XCTAssertEqual(try Fixture.verifier().verifyAndDecodeNotification(jws).externalPurchaseToken?.environment, .sandbox)
        assertRefused(.environmentNotAllowed) { try Fixture.verifier(environments: [.production]).verifyAndDecodeNotification(jws) }
    }
}
