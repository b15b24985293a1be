import AppleTrust
import Foundation
import IAPCore
import Synchronization
import TestPKI
import XCTest

/// OCSP through OpenSSL, answered in process by the test PKI's responder: no network.
final class OnlineChecksTests: XCTestCase {
    struct ResponderTransport: OCSPTransport {
        let responder: TestPKI.OCSPResponder
        func post(_ body: Data, to url: URL, timeout: Duration) async throws(VerificationError) -> Data {
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

    /// The transaction id `verifier` accepts `jws` with, awaiting its OCSP answers as the gateway does.
    func verified(_ jws: String, by verifier: SignedDataVerifier) async throws(VerificationError) -> String {
        try await verifier.verifying { v throws(VerificationError) in try v.verifyAndDecodeTransaction(jws).transactionId }
    }

    /// The code `verifier` refuses `jws` with (nil when it accepts it).
    func refusal(_ jws: String, by verifier: SignedDataVerifier) async -> VerificationError.Code? {
        do throws(VerificationError) { _ = try await verified(jws, by: verifier); return nil } catch { return error.code }
    }

    func leafToken() throws -> String {
        let leaf = try Self.ca.issueLeaf(validity: .around(Fixture.now, days: 30), ocspURL: "http://ocsp.test.invalid/leaf")
        return try Self.ca.signer(leaf: leaf).sign(Fixture.transaction())
    }

    func testReplayedAnswerWithoutNextUpdateFromAMonthAgoIsStale() async throws {
        var responder = TestPKI.OCSPResponder(authority: Self.ca)
        responder.thisUpdateAge = 30 * 86_400
        responder.nextUpdateIn = nil
        let refused = await refusal(try leafToken(), by: try verifier(responder: responder))
        XCTAssertEqual(refused, .revocationCheckUnavailable)
    }

    func testFreshAnswerWithoutNextUpdateIsAccepted() async throws {
        var responder = TestPKI.OCSPResponder(authority: Self.ca)
        responder.nextUpdateIn = nil
        let accepted = try await verified(try leafToken(), by: try verifier(responder: responder))
        XCTAssertEqual(accepted, "2000000000000001")
    }

    func testAnswerWhoseNextUpdateHasPassedIsStale() async throws {
        var responder = TestPKI.OCSPResponder(authority: Self.ca)
        responder.thisUpdateAge = 2 * 86_400
        responder.nextUpdateIn = -86_400
        let refused = await refusal(try leafToken(), by: try verifier(responder: responder))
        XCTAssertEqual(refused, .revocationCheckUnavailable)
    }

    func testAnswerSignedByAForeignCAIsRefused() async throws {
        var responder = TestPKI.OCSPResponder(authority: Self.ca)
        responder.signedBy = try TestPKI.CertificateAuthority.make().intermediate
        let refused = await refusal(try leafToken(), by: try verifier(responder: responder))
        XCTAssertEqual(refused, .revocationCheckUnavailable)
    }

    func testAnswerSignedByASiblingLeafWithoutOCSPDelegationIsRefused() async throws {
        var responder = TestPKI.OCSPResponder(authority: Self.ca)
        // Valid now (OpenSSL checks the responder at the real time), so only the missing delegation refuses it.
        responder.signedBy = try Self.ca.issueLeaf(validity: .around(days: 30))
        let refused = await refusal(try leafToken(), by: try verifier(responder: responder))
        XCTAssertEqual(refused, .revocationCheckUnavailable)
    }

    func testUnknownStatusIsNotGood() async throws {
        var responder = TestPKI.OCSPResponder(authority: Self.ca)
        responder.answersUnknown = true
        let refused = await refusal(try leafToken(), by: try verifier(responder: responder))
        XCTAssertEqual(refused, .revocationCheckUnavailable)
    }

    func testGoodAnswersFromTheResponderLetTheTransactionThrough() async throws {
        let leaf = try Self.ca.issueLeaf(validity: .around(Fixture.now, days: 30), ocspURL: "http://ocsp.test.invalid/leaf")
        let jws = try Self.ca.signer(leaf: leaf).sign(Fixture.transaction())
        let accepted = try await verified(jws, by: try verifier(revoked: []))
        XCTAssertEqual(accepted, "2000000000000001")
    }

    func testRevokedLeafIsRefused() async throws {
        let leaf = try Self.ca.issueLeaf(validity: .around(Fixture.now, days: 30), ocspURL: "http://ocsp.test.invalid/leaf")
        let jws = try Self.ca.signer(leaf: leaf).sign(Fixture.transaction())
        let refused = await refusal(jws, by: try verifier(revoked: [leaf.certificate]))
        XCTAssertEqual(refused, .certificateRevoked)
    }

    func testRevokedIntermediateIsRefused() async throws {
        let leaf = try Self.ca.issueLeaf(validity: .around(Fixture.now, days: 30), ocspURL: "http://ocsp.test.invalid/leaf")
        let jws = try Self.ca.signer(leaf: leaf).sign(Fixture.transaction())
        let refused = await refusal(jws, by: try verifier(revoked: [Self.ca.intermediate.certificate]))
        XCTAssertEqual(refused, .certificateRevoked)
    }

    func testLeafNamingNoResponderCannotBeCheckedOnline() async throws {
        let leaf = try Self.ca.issueLeaf(validity: .around(Fixture.now, days: 30))
        let jws = try Self.ca.signer(leaf: leaf).sign(Fixture.transaction())
        let refused = await refusal(jws, by: try verifier(revoked: []))
        XCTAssertEqual(refused, .revocationCheckUnavailable)
    }

    /// Counts the requests it passes to the test PKI's responder.
    final class CountingTransport: OCSPTransport {
        let inner: ResponderTransport
        let posts = Atomic<Int>(0)
        init(_ responder: TestPKI.OCSPResponder) { inner = ResponderTransport(responder: responder) }
        func post(_ body: Data, to url: URL, timeout: Duration) async throws(VerificationError) -> Data {
            posts.add(1, ordering: .relaxed)
            return try await inner.post(body, to: url, timeout: timeout)
        }
    }

    func countingVerifier(_ transport: CountingTransport) throws -> SignedDataVerifier {
        try SignedDataVerifier(rootCertificates: [Self.ca.root.der], bundleId: Fixture.bundleId, appAppleId: nil,
                               environments: [.sandbox], enableOnlineChecks: true, now: { Fixture.now }, ocspTransport: transport)
    }

    func testSynchronousCallerWithOnlineChecksIsRefusedWithoutAsking() throws {
        let transport = CountingTransport(.init(authority: Self.ca))
        let verifier = try countingVerifier(transport)
        let jws = try leafToken()
        assertRefused(.revocationCheckUnavailable) { try verifier.verifyAndDecodeTransaction(jws) }
        XCTAssertEqual(transport.posts.load(ordering: .relaxed), 0)
    }

    func testGoodAnswerIsKeptForTheChainUntilTheRecheck() async throws {
        let transport = CountingTransport(.init(authority: Self.ca))
        let verifier = try countingVerifier(transport)
        let jws = try leafToken()
        for _ in 0..<3 {
            let accepted = try await verified(jws, by: verifier)
            XCTAssertEqual(accepted, "2000000000000001")
        }
        // Leaf and intermediate, asked about once.
        XCTAssertEqual(transport.posts.load(ordering: .relaxed), 2)
    }

    func testBodyCatchingItsRefusalSeesTheAnswerItWouldHaveWaitedFor() async throws {
        let leaf = try Self.ca.issueLeaf(validity: .around(Fixture.now, days: 30), ocspURL: "http://ocsp.test.invalid/leaf")
        let jws = try Self.ca.signer(leaf: leaf).sign(Fixture.transaction())
        for (revoked, expected) in [([leaf.certificate], "CERTIFICATE_REVOKED"), ([], "2000000000000001")] {
            let outcome = try await verifier(revoked: revoked).verifying { v throws(VerificationError) -> String in
                do throws(VerificationError) { return try v.verifyAndDecodeTransaction(jws).transactionId } catch { return error.code.rawValue }
            }
            XCTAssertEqual(outcome, expected)
        }
    }

    func testOneBodyVerifyingTwoChainsHasBothAskedAbout() async throws {
        let transport = CountingTransport(.init(authority: Self.ca))
        let verifier = try countingVerifier(transport)
        let first = try leafToken(), second = try leafToken()
        let ids = try await verifier.verifying { v throws(VerificationError) in
            [try v.verifyAndDecodeTransaction(first).transactionId, try v.verifyAndDecodeTransaction(second).transactionId]
        }
        XCTAssertEqual(ids, ["2000000000000001", "2000000000000001"])
        // Two leaves and their one intermediate, asked about for each chain.
        XCTAssertEqual(transport.posts.load(ordering: .relaxed), 4)
    }
}
