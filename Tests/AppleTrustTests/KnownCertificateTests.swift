@testable import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// x5c certificates with a pinned root's or a verified intermediate's exact DER are not parsed
/// again, but being known vouches for nothing: every chain is still built and checked.
final class KnownCertificateTests: XCTestCase {
    func testRootAndVerifiedIntermediateAreReusedWithoutAChainCache() throws {
        let v = try Fixture.verifier(cacheCapacity: 0)
        let jws = try Fixture.signer.sign(Fixture.transaction())
        _ = try v.verifyAndDecodeTransaction(jws)
        XCTAssertEqual(v.verifiedIntermediates.hits, 0, "the first chain's intermediate is parsed")
        _ = try v.verifyAndDecodeTransaction(jws)
        XCTAssertEqual(v.verifiedIntermediates.hits, 1, "the second reuses it")
        let root = Array(Fixture.ca.root.der).withUnsafeBufferPointer { v.knownCertificate($0) }
        XCTAssertTrue(root === v.policy.roots[0], "x5c[2] with the pinned root's bytes is the pinned root itself")
    }

    func testALeafNotIssuedByTheKnownIntermediateIsStillRefused() throws {
        let v = try Fixture.verifier(cacheCapacity: 0)
        _ = try v.verifyAndDecodeTransaction(try Fixture.signer.sign(Fixture.transaction()))
        // A leaf of another CA (same names), presented under the known intermediate and root.
        let other = try TestPKI.CertificateAuthority.make()
        let stranger = try other.issueLeaf(validity: .around(Fixture.now, days: 30))
        let forged = TestPKI.JWSSigner(x5c: [stranger.der, Fixture.ca.intermediate.der, Fixture.ca.root.der], key: stranger.key)
        let jws = try forged.sign(Fixture.transaction())
        let cold = code { _ = try Fixture.verifier(cacheCapacity: 0).verifyAndDecodeTransaction(jws) }
        XCTAssertNotNil(cold)
        XCTAssertEqual(code { _ = try v.verifyAndDecodeTransaction(jws) }, cold)
        XCTAssertGreaterThan(v.verifiedIntermediates.hits, 0, "the known intermediate was reused, and the chain still refused")
    }

    func testALeafWithoutTheMarkerUnderTheKnownIntermediateIsStillMissingAppleOID() throws {
        let v = try Fixture.verifier(cacheCapacity: 0)
        _ = try v.verifyAndDecodeTransaction(try Fixture.signer.sign(Fixture.transaction()))
        let bare = try Fixture.ca.issueLeaf(validity: .around(Fixture.now, days: 30), hasAppleOID: false)
        assertRefused(.missingAppleOID) { try v.verifyAndDecodeTransaction(try Fixture.ca.signer(leaf: bare).sign(Fixture.transaction())) }
    }

    /// Known certificates in the wrong x5c slot, or a leaf whose own validity does not cover the
    /// payload date, are refused by a warm verifier exactly as by a fresh one.
    private func assertRefusedAsWhenCold(_ jws: String, reusesIntermediate: Bool = true,
                                         file: StaticString = #filePath, line: UInt = #line) throws {
        let warm = try Fixture.verifier(cacheCapacity: 0)
        _ = try warm.verifyAndDecodeTransaction(try Fixture.signer.sign(Fixture.transaction()))
        let cold = code { _ = try Fixture.verifier(cacheCapacity: 0).verifyAndDecodeTransaction(jws) }
        XCTAssertNotNil(cold, file: file, line: line)
        let hitsBefore = warm.verifiedIntermediates.hits
        XCTAssertEqual(code { _ = try warm.verifyAndDecodeTransaction(jws) }, cold, file: file, line: line)
        if reusesIntermediate {
            XCTAssertGreaterThan(warm.verifiedIntermediates.hits, hitsBefore, "a known certificate was reused", file: file, line: line)
        }
    }

    func testTheKnownIntermediateInTheLeafSlotIsRefusedAsWhenCold() throws {
        let ca = Fixture.ca
        let jws = try TestPKI.JWSSigner(x5c: [ca.intermediate.der, ca.intermediate.der, ca.root.der], key: Fixture.leaf.key)
            .sign(Fixture.transaction())
        try assertRefusedAsWhenCold(jws)
    }

    func testThePinnedRootInTheIntermediateSlotIsRefusedAsWhenCold() throws {
        let ca = Fixture.ca
        let jws = try TestPKI.JWSSigner(x5c: [Fixture.leaf.der, ca.root.der, ca.root.der], key: Fixture.leaf.key)
            .sign(Fixture.transaction())
        // x5c[1] and x5c[2] are the pinned root's object (knownCertificate's first branch).
        try assertRefusedAsWhenCold(jws, reusesIntermediate: false)
    }

    func testAnExpiredLeafUnderTheKnownIntermediateIsRefusedAsWhenCold() throws {
        let old = try Fixture.ca.issueLeaf(validity: .init(notBefore: Fixture.now.addingTimeInterval(-86_400 * 60),
                                                           notAfter: Fixture.now.addingTimeInterval(-86_400 * 30)))
        let jws = try Fixture.ca.signer(leaf: old).sign(Fixture.transaction())
        try assertRefusedAsWhenCold(jws)
    }
}

private func code(_ body: () throws -> Void) -> VerificationError.Code? {
    do { try body(); return nil } catch { return (error as? VerificationError)?.code }
}
