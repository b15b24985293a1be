import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// The chain is judged before a single byte of the payload: a token from another PKI is
/// UNTRUSTED_ROOT however its payload is broken, never a payload error that would reveal how far
/// attacker JSON got.
final class TrustBeforePayloadTests: XCTestCase {
    static let foreign = try! TestPKI.CertificateAuthority.make()
    static let foreignLeaf = try! foreign.issueLeaf(validity: .around(Fixture.now, days: 30))

    func foreignToken(payloadText: String) throws -> String {
        try TestPKI.signJWS(payloadText: payloadText, chain: Self.foreign.signer(leaf: Self.foreignLeaf).x5c, key: Self.foreignLeaf.key)
    }

    func testForeignTokenWithAnEmptyPayloadIsUntrustedNotMissingField() throws {
        let jws = try foreignToken(payloadText: "{}")
        assertRefused(.untrustedRoot) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
    }

    func testForeignTokenWithAnotherKindOfPayloadIsUntrustedNotWrongKind() throws {
        let jws = try foreignToken(payloadText: Fixture.renewalInfo(["signedDate": .null]).jsonText)
        assertRefused(.untrustedRoot) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
    }

    func testForeignTokenWithGarbageJSONIsUntrustedNotMalformedJSON() throws {
        let jws = try foreignToken(payloadText: "{\"signedDate\": [[[")
        assertRefused(.untrustedRoot) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
        assertRefused(.untrustedRoot) { try Fixture.verifier().verifyAndDecodeNotification(jws) }
    }

    func testForeignTokenWithANonBase64PayloadSegmentIsUntrusted() throws {
        let jws = try foreignToken(payloadText: "{}")
        assertRefused(.untrustedRoot) { try Fixture.verifier().verifyAndDecodeTransaction(replacingSegment(jws, 1, with: "%%%")) }
    }

    func testForeignTokenWithABadSignatureIsUntrustedNotInvalidSignature() throws {
        let jws = try foreignToken(payloadText: Fixture.transaction().jsonText)
        let other = try foreignToken(payloadText: Fixture.transaction(["transactionId": "9"]).jsonText)
        assertRefused(.untrustedRoot) { try Fixture.verifier().verifyAndDecodeTransaction(replacingSegment(jws, 2, with: segment(other, 2))) }
    }

    func testPinnedChainMissingTheLeafOIDIsRefusedBeforeTheGarbagePayload() throws {
        let leaf = try Fixture.ca.issueLeaf(validity: .around(Fixture.now, days: 30), hasAppleOID: false)
        let jws = try TestPKI.signJWS(payloadText: "not json", chain: Fixture.ca.signer(leaf: leaf).x5c, key: leaf.key)
        assertRefused(.missingAppleOID) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
    }

    func testChainExpiredAtSignedDateIsStillJudgedAtThatDateOnceTrusted() throws {
        // Time is the one check that must wait for the (verified) payload: its date picks the instant.
        let leaf = try Fixture.ca.issueLeaf(validity: .init(notBefore: Fixture.now.addingTimeInterval(-86_400 * 30),
                                                             notAfter: Fixture.now.addingTimeInterval(-86_400)))
        let jws = try Fixture.ca.signer(leaf: leaf).sign(Fixture.transaction())
        assertRefused(.certificateExpired) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
    }
}
