import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// The certificate chain: pinned root, Apple's marker OIDs, validity at the payload's date.
final class ChainTests: XCTestCase {
    func testSameNameRootWithAnotherKeyIsUntrusted() throws {
        let impostor = try TestPKI.CertificateAuthority.make(rootName: Fixture.ca.root.certificate.subjectCommonName)
        XCTAssertEqual(impostor.root.certificate.subjectCommonName, Fixture.ca.root.certificate.subjectCommonName)
        let leaf = try impostor.issueLeaf(validity: .around(Fixture.now, days: 30))
        let jws = try impostor.signer(leaf: leaf).sign(Fixture.transaction())
        assertRefused(.untrustedRoot) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
    }

    func testImpostorChainPresentingThePinnedRootIsRefused() throws {
        // x5c[2] is the genuine pinned root, but the intermediate was signed by an impostor key.
        let impostor = try TestPKI.CertificateAuthority.make(rootName: Fixture.ca.root.certificate.subjectCommonName)
        let leaf = try impostor.issueLeaf(validity: .around(Fixture.now, days: 30))
        let chain = [leaf.der, impostor.intermediate.der, Fixture.ca.root.der]
        let jws = try TestPKI.signJWS(payload: Fixture.transaction(), chain: chain, key: leaf.key)
        XCTAssertThrowsError(try Fixture.verifier().verifyAndDecodeTransaction(jws)) { error in
            let code = (error as? VerificationError)?.code
            XCTAssertTrue(code == .invalidCertificateChain || code == .untrustedRoot, "\(error)")
        }
    }

    func testIntermediateWithoutAppleOIDIsRefused() throws {
        let ca = try TestPKI.CertificateAuthority.make(intermediateHasAppleOID: false)
        let leaf = try ca.issueLeaf(validity: .around(Fixture.now, days: 30))
        let jws = try ca.signer(leaf: leaf).sign(Fixture.transaction())
        assertRefused(.missingAppleOID) { try Fixture.verifier(roots: [ca.root.der]).verifyAndDecodeTransaction(jws) }
    }

    func testLeafWithoutAppleOIDIsRefused() throws {
        let leaf = try Fixture.ca.issueLeaf(validity: .around(Fixture.now, days: 30), hasAppleOID: false)
        let jws = try Fixture.ca.signer(leaf: leaf).sign(Fixture.transaction())
        assertRefused(.missingAppleOID) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
    }

    func testLeafExpiredAtSignedDateIsRefused() throws {
        let leaf = try Fixture.ca.issueLeaf(validity: .init(notBefore: Fixture.now.addingTimeInterval(-86_400 * 30),
                                                             notAfter: Fixture.now.addingTimeInterval(-86_400)))
        let jws = try Fixture.ca.signer(leaf: leaf).sign(Fixture.transaction())
        assertRefused(.certificateExpired) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
    }

    func testLeafNotYetValidAtSignedDateIsRefused() throws {
        let leaf = try Fixture.ca.issueLeaf(validity: .init(notBefore: Fixture.now.addingTimeInterval(86_400),
                                                             notAfter: Fixture.now.addingTimeInterval(86_400 * 30)))
        let jws = try Fixture.ca.signer(leaf: leaf).sign(Fixture.transaction())
        assertRefused(.certificateNotYetValid) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
    }

    func testOldPayloadVerifiesAtItsSignedDateWithAnExpiredLeafOffline() throws {
        let leaf = try Fixture.ca.issueLeaf(validity: .init(notBefore: Fixture.now.addingTimeInterval(-86_400 * 30),
                                                             notAfter: Fixture.now.addingTimeInterval(-86_400)))
        let signedAt = Fixture.nowMs - 86_400_000 * 2
        let jws = try Fixture.ca.signer(leaf: leaf).sign(Fixture.transaction(["signedDate": .int(signedAt)]))
        XCTAssertEqual(try Fixture.verifier().verifyAndDecodeTransaction(jws).signedDate, signedAt)
        assertRefused(.certificateExpired) { try Fixture.verifier(online: true).verifyAndDecodeTransaction(jws) }
    }

    func testOnlineChecksWithAnUnreachableResponderAreRetryable() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction())
        XCTAssertThrowsError(try Fixture.verifier(online: true).verifyAndDecodeTransaction(jws)) { error in
            let e = error as? VerificationError
            XCTAssertEqual(e?.code, .revocationCheckUnavailable)
            XCTAssertEqual(e?.retryable, true)
        }
    }

    func testLeafWithAP384KeyCannotSignES256() throws {
        // A chain that is fine in itself but whose leaf key is not P-256.
        let ca = Fixture.ca
        let p384 = try ECPrivateKey.generate(.p384)
        let text = Fixture.transaction().jsonText
        XCTAssertThrowsError(try TestPKI.signJWS(payloadText: text, chain: ca.signer(leaf: Fixture.leaf).x5c, key: p384))
    }
}
