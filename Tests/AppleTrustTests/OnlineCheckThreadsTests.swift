import AppleTrust
import Foundation
import IAPCore
import Synchronization
import TestPKI
import XCTest

/// Verifications with online checks, awaited from async code, wait on OCSP responders on threads of
/// their own: however many hang, Swift's cooperative pool keeps running other work.
final class OnlineCheckThreadsTests: XCTestCase {
    /// Answers like the test PKI's responder, but only once the test opens it: a responder that hangs.
    final class HangingTransport: OCSPTransport, @unchecked Sendable {
        let responder: TestPKI.OCSPResponder
        let opened = DispatchSemaphore(value: 0)
        let waiting = Atomic<Int>(0)
        init(responder: TestPKI.OCSPResponder) { self.responder = responder }

        func post(_ body: Data, to url: URL, timeout: TimeInterval) throws(VerificationError) -> Data {
            waiting.add(1, ordering: .sequentiallyConsistent)
            opened.wait()
            opened.signal()  // once open, open for every request
            return try responder.respond(to: body)
        }
    }

    func testHangingOCSPRespondersDoNotHoldTheCooperativePool() async throws {
        let ca = try TestPKI.CertificateAuthority.make(intermediateOCSPURL: "http://ocsp.test.invalid/root")
        let transport = HangingTransport(responder: .init(authority: ca))
        let verifier = try SignedDataVerifier(rootCertificates: [ca.root.der], bundleId: Fixture.bundleId, appAppleId: nil,
                                              environments: [.sandbox], enableOnlineChecks: true, now: { Fixture.now },
                                              ocspTransport: transport)
        let leaf = try ca.issueLeaf(validity: .around(Fixture.now, days: 30), ocspURL: "http://ocsp.test.invalid/leaf")
        let token = try ca.signer(leaf: leaf).sign(Fixture.transaction())
        // More verifications than the pool has threads, all waiting on the responder.
        let verifications = (0..<(2 * ProcessInfo.processInfo.activeProcessorCount + 2)).map { _ in
            Task { () async throws(VerificationError) -> String in
                try await verifier.verifying { v throws(VerificationError) in try v.verifyAndDecodeTransaction(token).transactionId }
            }
        }
        // The responder opens after 5 s whatever happens, so a pool it holds is freed and the test ends.
        let released = Atomic<Bool>(false)
        DispatchQueue.global().asyncAfter(deadline: .now() + 5) {
            released.store(true, ordering: .sequentiallyConsistent)
            transport.opened.signal()
        }
        while transport.waiting.load(ordering: .sequentiallyConsistent) == 0, !released.load(ordering: .sequentiallyConsistent) {
            await Task.yield()
        }

        let ranBeforeTheResponderAnswered = await Task { !released.load(ordering: .sequentiallyConsistent) }.value
        transport.opened.signal()
        var answered: [String] = []
        for verification in verifications { answered.append(try await verification.value) }

        XCTAssertTrue(ranBeforeTheResponderAnswered, "other async work waited for hanging OCSP requests")
        XCTAssertEqual(Set(answered), ["2000000000000001"])
    }
}
