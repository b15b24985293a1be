@testable import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// One pinned-chain engine for JWS and PKCS#7: the same rules (pinned root, Apple's marker OIDs,
/// length, validity time) refuse the same chains with the same codes whichever path asks.
final class PinnedChainPolicyTests: XCTestCase {
    /// The rules a receipt signer's chain meets after OpenSSL built it (as `ReceiptTrustStore` uses them).
    func receiptRules(_ policy: PinnedChainPolicy) -> [any ChainPolicy] {
        [policy.pinnedRoot, ExactChainLength(3, refusedAs: .invalidCertificateChain), AppleMarkers()]
    }

    func code(_ body: () throws -> Void) -> VerificationError.Code? {
        do { try body(); return nil } catch { return (error as? VerificationError)?.code }
    }

    /// The x5c certificates of a JWS header, read as the verifier reads them.
    func x5c(_ jws: String) throws -> [X509Certificate] {
        let header = Array(jws.split(separator: ".")[0].utf8)
        return try header.withUnsafeBufferPointer { (bytes) throws(VerificationError) in try SignedDataVerifier.decodeHeader(bytes) }
    }

    func testApplesRealJWSChainMeetsBothPathsRulesUnderG3AndNeitherUnderAnotherRoot() throws {
        let chain = try x5c(AppleRealVectors.text(AppleRealVectors.sandboxConsumableTransaction))
        let g3 = try PinnedChainPolicy(rootCertificates: [AppleRealVectors.data(AppleRealVectors.appleRootG3)])
        let window = try g3.verifyJWSChain(chain)
        XCTAssertTrue(window.notBefore < window.notAfter)
        let inside = window.notBefore + 86_400
        let built = try g3.build(leaf: chain[0], intermediates: [chain[1]], maxIntermediates: nil, checkingTimeAt: inside)
        XCTAssertEqual(built.map(\.der), chain.map(\.der), "OpenSSL built the presented chain, ending in the pinned G3")
        XCTAssertNoThrow(try receiptRules(g3).check(built))
        XCTAssertEqual(ChainValidity(built), window)

        let incRoot = try PinnedChainPolicy(rootCertificates: [AppleRealVectors.data(AppleRealVectors.appleIncRoot)])
        XCTAssertEqual(code { _ = try incRoot.verifyJWSChain(chain) }, .untrustedRoot)
        XCTAssertEqual(code { _ = try incRoot.build(leaf: chain[0], intermediates: [chain[1]], maxIntermediates: nil,
                                                    checkingTimeAt: inside) }, .untrustedRoot)
        let none = try PinnedChainPolicy(rootCertificates: [])
        XCTAssertEqual(code { _ = try none.build(leaf: chain[0], intermediates: [chain[1]], maxIntermediates: nil,
                                                 checkingTimeAt: inside) }, .untrustedRoot, "no roots trusts nothing")
    }

    func testMissingMarkerOIDsAreMissingAppleOIDOnBothPaths() throws {
        for (intermediateMarked, leafMarked) in [(false, true), (true, false)] {
            let ca = try TestPKI.CertificateAuthority.make(intermediateHasAppleOID: intermediateMarked)
            let leaf = try ca.issueLeaf(hasAppleOID: leafMarked)
            let chain = try [leaf.der, ca.intermediate.der, ca.root.der].map { try X509Certificate(der: $0) }
            let policy = try PinnedChainPolicy(rootCertificates: [ca.root.der])
            XCTAssertEqual(code { _ = try policy.verifyJWSChain(chain) }, .missingAppleOID)
            let built = try policy.build(leaf: chain[0], intermediates: [chain[1]], maxIntermediates: nil,
                                         checkingTimeAt: Int64(Date().timeIntervalSince1970))
            XCTAssertEqual(code { try self.receiptRules(policy).check(built) }, .missingAppleOID)
        }
    }

    func testValidityTimeIsTheSameVerdictWhetherOpenSSLOrTheRuleAppliesIt() throws {
        let now = Date(timeIntervalSince1970: 1_760_000_000)
        let ca = try TestPKI.CertificateAuthority.make(validity: .around(now, days: 3650))
        let leaf = try ca.issueLeaf(validity: .around(now, days: 10))
        let chain = try [leaf.der, ca.intermediate.der, ca.root.der].map { try X509Certificate(der: $0) }
        let policy = try PinnedChainPolicy(rootCertificates: [ca.root.der])
        let window = try policy.verifyJWSChain(chain)
        let second = Int64(now.timeIntervalSince1970)
        for (at, expected) in [(second, nil), (second + 20 * 86_400, VerificationError.Code.certificateExpired),
                               (second - 20 * 86_400, .certificateNotYetValid)] {
            XCTAssertEqual(code { try ValidityTime(at).check(window) }, expected, "rule at \(at)")
            XCTAssertEqual(code { try ValidityTime(at).check(chain) }, expected, "rule on the chain at \(at)")
            XCTAssertEqual(code { _ = try policy.build(leaf: chain[0], intermediates: [chain[1]], maxIntermediates: nil,
                                                       checkingTimeAt: at) }, expected, "OpenSSL at \(at)")
        }
    }

    func testTheLengthRuleRefusesWithTheCodeItsPathChose() throws {
        let ca = try TestPKI.CertificateAuthority.make()
        let leaf = try ca.issueLeaf()
        let two = try [leaf.der, ca.intermediate.der].map { try X509Certificate(der: $0) }
        XCTAssertEqual(code { try ExactChainLength(3, refusedAs: .invalidChainLength).check(two) }, .invalidChainLength)
        XCTAssertEqual(code { try ExactChainLength(3, refusedAs: .invalidCertificateChain).check(two) }, .invalidCertificateChain)
        let policy = try PinnedChainPolicy(rootCertificates: [ca.root.der])
        XCTAssertEqual(code { _ = try policy.verifyJWSChain(two) }, .invalidChainLength)
    }

    func testPinnedRootAcceptsTheRootOrItsKeyButNotItsName() throws {
        let ca = try TestPKI.CertificateAuthority.make()
        let sameName = try TestPKI.CertificateAuthority.make(rootName: ca.root.certificate.subjectCommonName)
        let policy = try PinnedChainPolicy(rootCertificates: [ca.root.der])
        let leaf = try ca.issueLeaf()
        let chain = try [leaf.der, ca.intermediate.der, ca.root.der].map { try X509Certificate(der: $0) }
        XCTAssertNoThrow(try policy.pinnedRoot.check(chain))
        XCTAssertEqual(code { try policy.pinnedRoot.check([chain[0], chain[1], sameName.root.certificate]) }, .untrustedRoot)
        XCTAssertEqual(code { try policy.pinnedRoot.check([]) }, .untrustedRoot)
    }

    func testTheTestPKIMarksItsChainsWithTheOneDefinitionOfApplesOIDs() throws {
        let ca = try TestPKI.CertificateAuthority.make()
        XCTAssertTrue(ca.intermediate.certificate.hasExtension(oid: "1.2.840.113635.100.6.2.1"))
        XCTAssertTrue(try ca.issueLeaf().certificate.hasExtension(oid: "1.2.840.113635.100.6.11.1"))
        XCTAssertEqual(AppleMarkerOID.wwdrIntermediate, "1.2.840.113635.100.6.2.1")
        XCTAssertEqual(AppleMarkerOID.signingLeaf, "1.2.840.113635.100.6.11.1")
    }
}
