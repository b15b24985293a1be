@testable import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// Review of the known-certificate reuse on cold JWS: known certificates in the wrong x5c slot,
/// and a leaf whose own validity does not cover the payload date, are refused warm as cold.
final class KnownCertificateReviewTests: XCTestCase {
    private func refusal(_ body: () throws -> Void) -> VerificationError.Code? {
        do { try body(); return nil } catch { return (error as? VerificationError)?.code }
    }

    private func assertSameWarmAndCold(_ jws: String, reusesIntermediate: Bool = true, file: StaticString = #filePath, line: UInt = #line) throws {
        let warm = try Fixture.verifier(cacheCapacity: 0)
        _ = try warm.verifyAndDecodeTransaction(try Fixture.signer.sign(Fixture.transaction()))
        let cold = refusal { _ = try Fixture.verifier(cacheCapacity: 0).verifyAndDecodeTransaction(jws) }
        XCTAssertNotNil(cold, file: file, line: line)
        let hitsBefore = warm.verifiedIntermediates.hits
        XCTAssertEqual(refusal { _ = try warm.verifyAndDecodeTransaction(jws) }, cold, file: file, line: line)
        if reusesIntermediate { XCTAssertGreaterThan(warm.verifiedIntermediates.hits, hitsBefore, "a known certificate was reused", file: file, line: line) }
    }

    func testKnownIntermediateAsLeaf() throws {
        let ca = Fixture.ca
        let jws = try TestPKI.JWSSigner(x5c: [ca.intermediate.der, ca.intermediate.der, ca.root.der], key: Fixture.leaf.key)
            .sign(Fixture.transaction())
        try assertSameWarmAndCold(jws)
    }

    func testRootAsIntermediate() throws {
        let ca = Fixture.ca
        let jws = try TestPKI.JWSSigner(x5c: [Fixture.leaf.der, ca.root.der, ca.root.der], key: Fixture.leaf.key)
            .sign(Fixture.transaction())
        // x5c[1] and x5c[2] are the pinned root's object (knownCertificate's first branch).
        try assertSameWarmAndCold(jws, reusesIntermediate: false)
    }

    func testExpiredLeafUnderKnownIntermediate() throws {
        let old = try Fixture.ca.issueLeaf(validity: .init(notBefore: Fixture.now.addingTimeInterval(-86_400 * 60),
                                                           notAfter: Fixture.now.addingTimeInterval(-86_400 * 30)))
        let jws = try Fixture.ca.signer(leaf: old).sign(Fixture.transaction())
        try assertSameWarmAndCold(jws)
    }
}
