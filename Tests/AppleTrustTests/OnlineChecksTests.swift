import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// OCSP through OpenSSL, answered in process by the test PKI's responder: no network.
final class OnlineChecksTests: XCTestCase {
    struct ResponderTransport: OCSPTransport {
        let responder: TestPKI.OCSPResponder
        func post(_ body: Data, to url: URL, timeout: TimeInterval) throws(VerificationError) -> Data {
            guard url.host == "ocsp.test.invalid" else { throw VerificationError(.revocationCheckUnavailable, "unexpected URL") }
            return try responder.respond(to: body)
        }
    }

    static let ca = try! TestPKI.CertificateAuthority.make(intermediateOCSPURL: "http://ocsp.test.invalid/root")

    func verifier(revoked: [X509Certificate]) throws -> SignedDataVerifier {
        try SignedDataVerifier(rootCertificates: [Self.ca.root.der], bundleId: Fixture.bundleId, appAppleId: nil,
                               environments: [.sandbox], enableOnlineChecks: true, now: { Fixture.now },
                               ocspTransport: ResponderTransport(responder: .init(authority: Self.ca, revoked: revoked)))
    }

    func verifier(responder: TestPKI.OCSPResponder) throws -> SignedDataVerifier {
        try SignedDataVerifier(rootCertificates: [Self.ca.root.der], bundleId: Fixture.bundleId, appAppleId: nil,
                               environments: [.sandbox], enableOnlineChecks: true, now: { Fixture.now },
                               ocspTransport: ResponderTransport(responder: responder))
    }

    func leafToken() throws -> String {
        let leaf = try Self.ca.issueLeaf(validity: .around(Fixture.now, days: 30), ocspURL: "http://ocsp.test.invalid/leaf")
        return try Self.ca.signer(leaf: leaf).sign(Fixture.transaction())
    }

    func testReplayedAnswerWithoutNextUpdateFromAMonthAgoIsStale() throws {
        var responder = TestPKI.OCSPResponder(authority: Self.ca)
        responder.thisUpdateAge = 30 * 86_400
        responder.nextUpdateIn = nil
        assertRefused(.revocationCheckUnavailable) { try verifier(responder: responder).verifyAndDecodeTransaction(try leafToken()) }
    }

    func testFreshAnswerWithoutNextUpdateIsAccepted() throws {
        var responder = TestPKI.OCSPResponder(authority: Self.ca)
        responder.nextUpdateIn = nil
        XCTAssertEqual(try verifier(responder: responder).verifyAndDecodeTransaction(try leafToken()).transactionId, "2000000000000001")
    }

    func testAnswerWhoseNextUpdateHasPassedIsStale() throws {
        var responder = TestPKI.OCSPResponder(authority: Self.ca)
        responder.thisUpdateAge = 2 * 86_400
        responder.nextUpdateIn = -86_400
        assertRefused(.revocationCheckUnavailable) { try verifier(responder: responder).verifyAndDecodeTransaction(try leafToken()) }
    }

    func testAnswerSignedByAForeignCAIsRefused() throws {
        var responder = TestPKI.OCSPResponder(authority: Self.ca)
        responder.signedBy = try TestPKI.CertificateAuthority.make().intermediate
        assertRefused(.revocationCheckUnavailable) { try verifier(responder: responder).verifyAndDecodeTransaction(try leafToken()) }
    }

    func testAnswerSignedByASiblingLeafWithoutOCSPDelegationIsRefused() throws {
        var responder = TestPKI.OCSPResponder(authority: Self.ca)
        // Valid now (OpenSSL checks the responder at the real time), so only the missing delegation refuses it.
        responder.signedBy = try Self.ca.issueLeaf(validity: .around(days: 30))
        assertRefused(.revocationCheckUnavailable) { try verifier(responder: responder).verifyAndDecodeTransaction(try leafToken()) }
    }

    func testUnknownStatusIsNotGood() throws {
        var responder = TestPKI.OCSPResponder(authority: Self.ca)
        responder.answersUnknown = true
        assertRefused(.revocationCheckUnavailable) { try verifier(responder: responder).verifyAndDecodeTransaction(try leafToken()) }
    }

    func testGoodAnswersFromTheResponderLetTheTransactionThrough() throws {
        let leaf = try Self.ca.issueLeaf(validity: .around(Fixture.now, days: 30), ocspURL: "http://ocsp.test.invalid/leaf")
        let jws = try Self.ca.signer(leaf: leaf).sign(Fixture.transaction())
        XCTAssertEqual(try verifier(revoked: []).verifyAndDecodeTransaction(jws).transactionId, "2000000000000001")
    }

    func testRevokedLeafIsRefused() throws {
        let leaf = try Self.ca.issueLeaf(validity: .around(Fixture.now, days: 30), ocspURL: "http://ocsp.test.invalid/leaf")
        let jws = try Self.ca.signer(leaf: leaf).sign(Fixture.transaction())
        assertRefused(.certificateRevoked) { try verifier(revoked: [leaf.certificate]).verifyAndDecodeTransaction(jws) }
    }

    func testRevokedIntermediateIsRefused() throws {
        let leaf = try Self.ca.issueLeaf(validity: .around(Fixture.now, days: 30), ocspURL: "http://ocsp.test.invalid/leaf")
        let jws = try Self.ca.signer(leaf: leaf).sign(Fixture.transaction())
        assertRefused(.certificateRevoked) { try verifier(revoked: [Self.ca.intermediate.certificate]).verifyAndDecodeTransaction(jws) }
    }

    func testLeafNamingNoResponderCannotBeCheckedOnline() throws {
        let leaf = try Self.ca.issueLeaf(validity: .around(Fixture.now, days: 30))
        let jws = try Self.ca.signer(leaf: leaf).sign(Fixture.transaction())
        assertRefused(.revocationCheckUnavailable) { try verifier(revoked: []).verifyAndDecodeTransaction(jws) }
    }
}
