import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// Data signed by Apple's real production PKI, verified against the real Apple Root CA - G3.
final class RealAppleVectorTests: XCTestCase {
    /// A fixed "now" in 2026, after the notification leaf's expiry (2025-10-11).
    static let now2026 = Date(timeIntervalSince1970: 1_780_000_000)

    func verifier(bundleId: String, appAppleId: Int64? = nil, environments: Set<AppStoreEnvironment>,
                  root: String = AppleRealVectors.appleRootG3, online: Bool = false) throws -> SignedDataVerifier {
        try SignedDataVerifier(rootCertificates: [try AppleRealVectors.data(root)], bundleId: bundleId,
                               appAppleId: appAppleId, environments: environments, enableOnlineChecks: online,
                               now: { Self.now2026 }, ocspTransport: UnreachableOCSPTransport())
    }

    func assertRefusedReal<T>(_ code: VerificationError.Code, _ body: () throws -> T, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            XCTAssertEqual((error as? VerificationError)?.code, code, "\(error)", file: file, line: line)
        }
    }

    var notification: String { get throws { try AppleRealVectors.text(AppleRealVectors.productionTestNotification) } }
    var transaction: String { get throws { try AppleRealVectors.text(AppleRealVectors.sandboxConsumableTransaction) } }

    func testProductionNotificationVerifiesOfflineAtItsSignedDate() throws {
        let v = try verifier(bundleId: "com.nineton.taller", appAppleId: 6450284872, environments: [.production])
        let n = try v.verifyAndDecodeNotification(try notification)
        XCTAssertEqual(n.notificationType, NotificationType(rawValue: "TEST"))
        XCTAssertEqual(n.signedDate, 1729136651128)
        XCTAssertEqual(n.notificationUUID, "2e2a6ce0-ec9f-4037-b1bf-618af85527bd")
        XCTAssertEqual(n.data?.bundleId, "com.nineton.taller")
        XCTAssertEqual(n.raw["version"], .string("2.0"))
    }

    /// The identity the verifier read is handed on with the payload, so nobody reads it again.
    func testProductionNotificationReturnsTheIdentityItWasHeldTo() throws {
        let identity = AppIdentity(bundleId: "com.nineton.taller", appAppleId: 6450284872, environments: [.production])
        let v = try SignedDataVerifier(rootCertificates: [try AppleRealVectors.data(AppleRealVectors.appleRootG3)], identity: identity,
                                       now: { Self.now2026 }, ocspTransport: UnreachableOCSPTransport())
        let n = try v.verifyAndDecodeNotification(try notification)
        XCTAssertEqual(n.verifiedIdentity?.bundleId, "com.nineton.taller")
        XCTAssertEqual(n.verifiedIdentity?.appAppleId, 6450284872)
        XCTAssertEqual(n.verifiedIdentity?.environment, .production)
    }

    func testProductionNotificationRefusedForAnotherBundle() throws {
        let v = try verifier(bundleId: "com.example.other", environments: [.production])
        assertRefusedReal(.bundleIdMismatch) { try v.verifyAndDecodeNotification(try notification) }
    }

    func testProductionNotificationRefusedForAnotherAppAppleId() throws {
        let v = try verifier(bundleId: "com.nineton.taller", appAppleId: 1, environments: [.production])
        assertRefusedReal(.appAppleIdMismatch) { try v.verifyAndDecodeNotification(try notification) }
    }

    func testProductionNotificationRefusedWhereOnlySandboxIsAllowed() throws {
        let v = try verifier(bundleId: "com.nineton.taller", environments: [.sandbox])
        assertRefusedReal(.environmentNotAllowed) { try v.verifyAndDecodeNotification(try notification) }
    }

    func testProductionNotificationRefusedWithOnlineChecksBecauseItsLeafHasExpired() throws {
        let v = try verifier(bundleId: "com.nineton.taller", appAppleId: 6450284872, environments: [.production], online: true)
        assertRefusedReal(.certificateExpired) { try v.verifyAndDecodeNotification(try notification) }
    }

    func testProductionNotificationIsNotATransaction() throws {
        let v = try verifier(bundleId: "com.nineton.taller", environments: [.production])
        assertRefusedReal(.wrongPayloadKind) { try v.verifyAndDecodeTransaction(try notification) }
    }

    func testSandboxConsumableTransactionVerifiesWithApplesFields() throws {
        let v = try verifier(bundleId: "com.goodheartapp", environments: [.sandbox])
        let t = try v.verifyAndDecodeTransaction(try transaction)
        XCTAssertEqual(t.transactionId, "2000000847061981")
        XCTAssertEqual(t.price, 230000)
        XCTAssertEqual(t.currency, "JPY")
        XCTAssertEqual(t.type, .consumable)
        XCTAssertEqual(t.environment, .sandbox)
        XCTAssertEqual(t.productId, "gh_super_good_ticket_1")
        XCTAssertEqual(t.signedDate, 1739161772561)
        XCTAssertEqual(t.raw["storefrontId"], .string("143462"))
    }

    func testSandboxTransactionRefusedForAnotherBundle() throws {
        let v = try verifier(bundleId: "com.example.other", environments: [.sandbox])
        assertRefusedReal(.bundleIdMismatch) { try v.verifyAndDecodeTransaction(try transaction) }
    }

    func testSandboxTransactionRefusedWhereOnlyProductionIsAllowed() throws {
        let v = try verifier(bundleId: "com.goodheartapp", environments: [.production])
        assertRefusedReal(.environmentNotAllowed) { try v.verifyAndDecodeTransaction(try transaction) }
    }

    func testSandboxTransactionIsNotRenewalInfo() throws {
        let v = try verifier(bundleId: "com.goodheartapp", environments: [.sandbox])
        assertRefusedReal(.wrongPayloadKind) { try v.verifyAndDecodeRenewalInfo(try transaction) }
    }

    func testSandboxTransactionRefusedAgainstTheLegacyReceiptRoot() throws {
        let v = try verifier(bundleId: "com.goodheartapp", environments: [.sandbox], root: AppleRealVectors.appleIncRoot)
        assertRefusedReal(.untrustedRoot) { try v.verifyAndDecodeTransaction(try transaction) }
    }

    func testAppleRootG3FingerprintMatchesThePublishedOne() throws {
        let root = try X509Certificate(der: try AppleRealVectors.data(AppleRealVectors.appleRootG3))
        XCTAssertEqual(root.sha256Fingerprint, "63343ABFB89A6A03EBB57E9B3F5FA7BE7C4F5C756F3017B3A8C488C3653E9179")
    }
}

/// Tests never reach the network: every OCSP request fails as an unreachable responder would.
struct UnreachableOCSPTransport: OCSPTransport {
    func post(_ body: Data, to url: URL, timeout: Duration) async throws(VerificationError) -> Data {
        throw VerificationError(.revocationCheckUnavailable, "test transport: no network")
    }
}
