import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// `maxInputBytes` (the gateway's `limits.maxJWSBytes`) bounds every kind of JWS: a JWS of exactly
/// the limit is read, one byte more is INPUT_TOO_LARGE before anything in it is parsed.
final class JWSSizeLimitTests: XCTestCase {
    private func fixtureVerifier(limit: Int) throws -> SignedDataVerifier {
        try SignedDataVerifier(rootCertificates: [Fixture.ca.root.der], bundleId: Fixture.bundleId,
                               appAppleId: Fixture.appAppleId, environments: [.sandbox, .production],
                               now: { Fixture.now }, ocspTransport: UnreachableOCSPTransport(), maxInputBytes: limit)
    }

    /// Verifies at the JWS's own length, and is refused one byte under it.
    private func assertBoundAt<T>(_ jws: String, _ verify: (SignedDataVerifier) throws -> T,
                                  file: StaticString = #filePath, line: UInt = #line) throws {
        let length = jws.utf8.count
        XCTAssertNoThrow(try verify(try fixtureVerifier(limit: length)), file: file, line: line)
        assertRefused(.inputTooLarge, file: file, line: line) { try verify(try fixtureVerifier(limit: length - 1)) }
    }

    func testEveryKindIsBoundedByTheConfiguredLimit() throws {
        let transaction = try Fixture.signer.sign(Fixture.transaction())
        try assertBoundAt(transaction) { try $0.verifyAndDecodeTransaction(transaction) }

        let renewal = try Fixture.signer.sign(Fixture.renewalInfo())
        try assertBoundAt(renewal) { try $0.verifyAndDecodeRenewalInfo(renewal) }

        let appTransaction = try Fixture.signer.sign(.object([
            "receiptType": "Sandbox", "bundleId": .string(Fixture.bundleId), "appAppleId": .int(Fixture.appAppleId),
            "receiptCreationDate": .int(Fixture.nowMs - 1000), "applicationVersion": "1",
        ]))
        try assertBoundAt(appTransaction) { try $0.verifyAndDecodeAppTransaction(appTransaction) }

        // The outer JWS holds the inner ones, so it is always the larger; each inner one goes
        // through the same bounded path when it is verified.
        let notification = try Fixture.signer.sign(Fixture.notification(
            data: Fixture.notificationData(transaction: transaction, renewal: renewal)))
        try assertBoundAt(notification) { try $0.verifyAndDecodeNotification(notification) }
    }

    func testApplesRealTransactionIsBoundedByTheConfiguredLimit() throws {
        let jws = try AppleRealVectors.text(AppleRealVectors.sandboxConsumableTransaction)
        func verifier(_ limit: Int) throws -> SignedDataVerifier {
            try SignedDataVerifier(rootCertificates: [try AppleRealVectors.data(AppleRealVectors.appleRootG3)],
                                   bundleId: "com.goodheartapp", appAppleId: nil, environments: [.sandbox],
                                   now: { Date(timeIntervalSince1970: 1_780_000_000) },
                                   ocspTransport: UnreachableOCSPTransport(), maxInputBytes: limit)
        }
        let length = jws.utf8.count
        XCTAssertEqual(try verifier(length).verifyAndDecodeTransaction(jws).transactionId, "2000000847061981")
        assertRefused(.inputTooLarge) { try verifier(length - 1).verifyAndDecodeTransaction(jws) }
        XCTAssertEqual(SignedDataVerifier.defaultMaxInputBytes, 64 * 1024)
    }
}
