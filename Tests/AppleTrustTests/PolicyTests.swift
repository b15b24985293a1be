import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// What is checked after the signature: identity, environment, clock, payload kind.
final class PolicyTests: XCTestCase {
    func testSignedDateBeyondClockSkewIsInTheFuture() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction(["signedDate": .int(Fixture.nowMs + 3_600_000)]))
        assertRefused(.signedDateInFuture) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
        let withinSkew = try Fixture.signer.sign(Fixture.transaction(["signedDate": .int(Fixture.nowMs + 30_000)]))
        XCTAssertNoThrow(try Fixture.verifier().verifyAndDecodeTransaction(withinSkew))
    }

    func testWrongBundleIsRefused() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction(["bundleId": "com.example.other"]))
        assertRefused(.bundleIdMismatch) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
    }

    func testWrongAppAppleIdIsRefused() throws {
        let payload: JSONValue = .object([
            "receiptType": "Sandbox", "bundleId": .string(Fixture.bundleId), "appAppleId": 42,
            "receiptCreationDate": .int(Fixture.nowMs - 1000), "applicationVersion": "1",
        ])
        let jws = try Fixture.signer.sign(payload)
        assertRefused(.appAppleIdMismatch) { try Fixture.verifier().verifyAndDecodeAppTransaction(jws) }
        XCTAssertEqual(try Fixture.verifier(appAppleId: nil).verifyAndDecodeAppTransaction(jws).appAppleId, 42)
    }

    func testEnvironmentOutsideTheAllowedSetIsRefused() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction())
        assertRefused(.environmentNotAllowed) { try Fixture.verifier(environments: [.production]).verifyAndDecodeTransaction(jws) }
    }

    func testXcodeDataIsRefusedUnlessLocalTestingIsAllowed() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction(["environment": "Xcode"]))
        assertRefused(.testEnvironmentNotAllowed) { try Fixture.verifier(environments: [.xcode]).verifyAndDecodeTransaction(jws) }
        XCTAssertEqual(try Fixture.verifier(environments: [.xcode], allowLocal: true).verifyAndDecodeTransaction(jws).environment, .xcode)
    }

    func testAllowedXcodeDataStillNeedsAGoodSignatureAndPinnedChain() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction(["environment": "Xcode"]))
        var sig = try Base64URL.decode(segment(jws, 2))
        sig[0] ^= 0x80
        let v = try Fixture.verifier(environments: [.xcode], allowLocal: true)
        assertRefused(.invalidSignature) { try v.verifyAndDecodeTransaction(replacingSegment(jws, 2, with: Base64URL.encode(sig))) }
        let stranger = try TestPKI.CertificateAuthority.make(rootName: "Xcode StoreKit Testing")
        let selfSigned = try stranger.signer(leaf: stranger.issueLeaf(validity: .around(Fixture.now, days: 1)))
            .sign(Fixture.transaction(["environment": "Xcode"]))
        assertRefused(.untrustedRoot) { try v.verifyAndDecodeTransaction(selfSigned) }
    }

    func testRenewalInfoIsNotATransactionAndViceVersa() throws {
        let renewal = try Fixture.signer.sign(Fixture.renewalInfo())
        let transaction = try Fixture.signer.sign(Fixture.transaction())
        let v = try Fixture.verifier()
        assertRefused(.wrongPayloadKind) { try v.verifyAndDecodeTransaction(renewal) }
        assertRefused(.wrongPayloadKind) { try v.verifyAndDecodeRenewalInfo(transaction) }
        assertRefused(.wrongPayloadKind) { try v.verifyAndDecodeNotification(transaction) }
        assertRefused(.wrongPayloadKind) { try v.verifyAndDecodeAppTransaction(transaction) }
        let r = try v.verifyAndDecodeRenewalInfo(renewal)
        XCTAssertEqual(r.autoRenewStatus, .on)
        XCTAssertEqual(r.originalTransactionId, "2000000000000001")
    }

    func testUnknownEnumValuesKeepTheirRawValue() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction(["type": "Future Kind", "offerType": 9]))
        let t = try Fixture.verifier().verifyAndDecodeTransaction(jws)
        XCTAssertEqual(t.type?.rawValue, "Future Kind")
        XCTAssertEqual(t.type?.isKnown, false)
        XCTAssertEqual(t.offerType?.rawValue, 9)
    }
}
