import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// Registered JWT claims (RFC 7519) in payloads Apple signs. Apple never sends `exp`, `nbf`, `aud`,
/// `iat`, `sub` or `jti`; Apple's Python library (PyJWT underneath) enforces them when present, so
/// the gateway does too, for every payload kind and every inner JWS of a notification.
final class RegisteredClaimsTests: XCTestCase {
    private typealias F = Fixture
    private static let nowSeconds = Int64(F.now.timeIntervalSince1970)
    /// 2001-01-01: the `exp` a genuinely signed transaction carried when the gateway granted it.
    private static let longAgo: JSONValue = .int(978_307_200)

    /// Signs `claims` into each kind of payload, standalone and inside a notification, and verifies it.
    private func everyKind(_ claims: [String: JSONValue]) throws -> [(String, () throws -> Void)] {
        let v = try F.verifier()
        func merged(_ base: JSONValue) -> JSONValue {
            var o = base.objectValue!
            for (k, value) in claims { o[k] = value }
            return .object(o)
        }
        let transaction = try F.signer.sign(merged(F.transaction()))
        let renewal = try F.signer.sign(merged(F.renewalInfo()))
        let appTransaction = try F.signer.sign(merged(Self.appTransaction))
        let plainTransaction = try F.signer.sign(F.transaction())
        let plainRenewal = try F.signer.sign(F.renewalInfo())
        let envelope = try F.signer.sign(merged(F.notification(data: F.notificationData(transaction: plainTransaction,
                                                                                         renewal: plainRenewal))))
        let innerTransaction = try F.signer.sign(F.notification(data: F.notificationData(transaction: transaction)))
        let innerRenewal = try F.signer.sign(F.notification(data: F.notificationData(transaction: plainTransaction,
                                                                                     renewal: renewal)))
        let innerAppTransaction = try F.signer.sign(Self.appTransactionNotification(appTransaction))
        return [
            ("transaction", { _ = try v.verifyAndDecodeTransaction(transaction) }),
            ("renewal info", { _ = try v.verifyAndDecodeRenewalInfo(renewal) }),
            ("app transaction", { _ = try v.verifyAndDecodeAppTransaction(appTransaction) }),
            ("notification", { _ = try v.verifyAndDecodeNotification(envelope) }),
            ("notification's signedTransactionInfo", { _ = try v.verifyAndDecodeNotification(innerTransaction) }),
            ("notification's signedRenewalInfo", { _ = try v.verifyAndDecodeNotification(innerRenewal) }),
            ("notification's signedAppTransactionInfo", { _ = try v.verifyAndDecodeNotification(innerAppTransaction) }),
        ]
    }

    private static let appTransaction: JSONValue = .object([
        "receiptType": "Sandbox", "bundleId": .string(F.bundleId), "appAppleId": .int(F.appAppleId),
        "receiptCreationDate": .int(F.nowMs - 1000), "applicationVersion": "1", "originalApplicationVersion": "1",
    ])

    private static func appTransactionNotification(_ jws: String) -> JSONValue {
        .object([
            "notificationType": "TEST", "notificationUUID": "6d0f8a6c-0000-4000-8000-000000000002", "version": "2.0",
            "signedDate": .int(F.nowMs - 500),
            "appData": .object(["bundleId": .string(F.bundleId), "appAppleId": .int(F.appAppleId), "environment": "Sandbox",
                                "signedAppTransactionInfo": .string(jws)]),
        ])
    }

    private func assertEveryKind(_ code: VerificationError.Code, _ claims: [String: JSONValue],
                                 file: StaticString = #filePath, line: UInt = #line) throws {
        for (kind, verify) in try everyKind(claims) {
            XCTAssertThrowsError(try verify(), "\(kind) with \(claims)", file: file, line: line) { error in
                XCTAssertEqual((error as? VerificationError)?.code, code, "\(kind): \(error)", file: file, line: line)
            }
        }
    }

    private func assertEveryKindAccepted(_ claims: [String: JSONValue], file: StaticString = #filePath, line: UInt = #line) throws {
        for (kind, verify) in try everyKind(claims) {
            XCTAssertNoThrow(try verify(), "\(kind) with \(claims)", file: file, line: line)
        }
    }

    func testWithoutRegisteredClaimsEveryKindVerifies() throws {
        try assertEveryKindAccepted([:])
    }

    func testExpInThePastIsRefusedForEveryKind() throws {
        try assertEveryKind(.jwtExpired, ["exp": Self.longAgo])
        try assertEveryKind(.jwtExpired, ["exp": .int(Self.nowSeconds - 1)])
    }

    func testExpAtNowIsExpiredAsPyJWTSays() throws {
        // PyJWT refuses exp <= now (no leeway by default).
        try assertEveryKind(.jwtExpired, ["exp": .int(Self.nowSeconds)])
    }

    func testExpInTheFutureIsAcceptedAsApplesLibraryAcceptsIt() throws {
        try assertEveryKindAccepted(["exp": .int(Self.nowSeconds + 3600), "nbf": .int(Self.nowSeconds - 3600),
                                     "iat": .int(Self.nowSeconds - 60)])
    }

    func testNbfInTheFutureIsRefusedForEveryKind() throws {
        try assertEveryKind(.jwtNotYetValid, ["nbf": .int(Self.nowSeconds + 1)])
    }

    func testIatInTheFutureIsRefusedForEveryKind() throws {
        try assertEveryKind(.jwtNotYetValid, ["iat": .int(Self.nowSeconds + 3600)])
    }

    func testANumericDateThatIsNotANumberIsRefusedForEveryKind() throws {
        for claim in ["iat", "exp", "nbf"] {
            for notANumber: JSONValue in [.string(String(Self.nowSeconds - 60)), .bool(true), .null, .object([:]), .array([])] {
                try assertEveryKind(.invalidFieldType, [claim: notANumber])
            }
        }
    }

    func testFractionalAndAbsurdNumericDatesAreComparedWithoutTrapping() throws {
        try assertEveryKind(.jwtExpired, ["exp": .double(Double(Self.nowSeconds) - 0.5)])
        try assertEveryKind(.jwtExpired, ["exp": .double(-1e300)])
        try assertEveryKind(.jwtNotYetValid, ["nbf": .double(1e300)])
        try assertEveryKindAccepted(["exp": .double(1e300), "iat": .double(Double(Self.nowSeconds) - 0.5)])
    }

    func testAnyAudienceIsRefusedForEveryKind() throws {
        for audience: JSONValue in [.string("appstoreconnect-v1"), .string(F.bundleId), .string(""), .array([]), .null] {
            try assertEveryKind(.jwtAudienceNotAccepted, ["aud": audience])
        }
    }

    func testSubjectAndJWTIdMustBeStrings() throws {
        for claim in ["sub", "jti"] {
            try assertEveryKind(.invalidFieldType, [claim: .int(1)])
            try assertEveryKind(.invalidFieldType, [claim: .null])
        }
        try assertEveryKindAccepted(["sub": "someone", "jti": "a-token-id", "iss": 7])
    }

    /// Nothing a payload says is acted on before its signature: an expired claim in a tampered
    /// payload is a bad signature, not an expired token.
    func testClaimsOfATamperedPayloadAreNeverReadFirst() throws {
        let jws = try F.signer.sign(F.transaction())
        let forged = F.transaction(["exp": Self.longAgo])
        let tampered = replacingSegment(jws, 1, with: Base64URL.encode(Array(forged.jsonText.utf8)))
        assertRefused(.invalidSignature) { try F.verifier().verifyAndDecodeTransaction(tampered) }
    }

    func testTheVerifiersClockDecides() throws {
        let jws = try F.signer.sign(F.transaction(["exp": .int(Self.nowSeconds + 10)]))
        XCTAssertNoThrow(try F.verifier().verifyAndDecodeTransaction(jws))
        let later = try SignedDataVerifier(rootCertificates: [F.ca.root.der], bundleId: F.bundleId, appAppleId: F.appAppleId,
                                           environments: [.sandbox], now: { F.now.addingTimeInterval(10) },
                                           ocspTransport: UnreachableOCSPTransport())
        assertRefused(.jwtExpired) { try later.verifyAndDecodeTransaction(jws) }
    }
}
