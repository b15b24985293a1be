import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// The verified-chain cache: hits save work, but never change an answer.
final class ChainCacheTests: XCTestCase {
    func testSecondVerificationUnderTheSameChainIsACacheHit() throws {
        let v = try Fixture.verifier()
        _ = try v.verifyAndDecodeTransaction(try Fixture.signer.sign(Fixture.transaction()))
        XCTAssertEqual(v.chainCacheMisses, 1)
        XCTAssertEqual(v.chainCacheHits, 0)
        _ = try v.verifyAndDecodeTransaction(try Fixture.signer.sign(Fixture.transaction(["transactionId": "2"])))
        XCTAssertEqual(v.chainCacheHits, 1)
    }

    func testTamperedSignatureFailsEvenWithTheChainCached() throws {
        let v = try Fixture.verifier()
        let jws = try Fixture.signer.sign(Fixture.transaction())
        _ = try v.verifyAndDecodeTransaction(jws)
        var sig = try Base64URL.decode(segment(jws, 2))
        sig[40] ^= 0x04
        assertRefused(.invalidSignature) { try v.verifyAndDecodeTransaction(replacingSegment(jws, 2, with: Base64URL.encode(sig))) }
        XCTAssertEqual(v.chainCacheHits, 1)
    }

    func testFailedChainIsNotCached() throws {
        let leaf = try Fixture.ca.issueLeaf(validity: .around(Fixture.now, days: 30), hasAppleOID: false)
        let jws = try Fixture.ca.signer(leaf: leaf).sign(Fixture.transaction())
        let v = try Fixture.verifier()
        assertRefused(.missingAppleOID) { try v.verifyAndDecodeTransaction(jws) }
        assertRefused(.missingAppleOID) { try v.verifyAndDecodeTransaction(jws) }
        XCTAssertEqual(v.chainCacheHits, 0)
        XCTAssertEqual(v.chainCacheMisses, 2)
    }

    func testCachedChainIsNotHonouredOutsideTheLeafValidity() throws {
        let leaf = try Fixture.ca.issueLeaf(validity: .init(notBefore: Fixture.now.addingTimeInterval(-86_400 * 10),
                                                             notAfter: Fixture.now.addingTimeInterval(-86_400 * 5)))
        let signer = Fixture.ca.signer(leaf: leaf)
        let v = try Fixture.verifier()
        let inside = try signer.sign(Fixture.transaction(["signedDate": .int(Fixture.nowMs - 86_400_000 * 7)]))
        XCTAssertNoThrow(try v.verifyAndDecodeTransaction(inside))
        let after = try signer.sign(Fixture.transaction(["signedDate": .int(Fixture.nowMs - 86_400_000 * 2)]))
        assertRefused(.certificateExpired) { try v.verifyAndDecodeTransaction(after) }
        let before = try signer.sign(Fixture.transaction(["signedDate": .int(Fixture.nowMs - 86_400_000 * 12)]))
        assertRefused(.certificateNotYetValid) { try v.verifyAndDecodeTransaction(before) }
    }

    func testCacheOfCapacityZeroStillVerifies() throws {
        let v = try Fixture.verifier(cacheCapacity: 0)
        let jws = try Fixture.signer.sign(Fixture.transaction())
        _ = try v.verifyAndDecodeTransaction(jws)
        _ = try v.verifyAndDecodeTransaction(jws)
        XCTAssertEqual(v.chainCacheHits, 0)
    }

    func testConcurrentVerificationsAgree() throws {
        let v = try Fixture.verifier(cacheCapacity: 2)
        let signers = try (0..<3).map { _ in Fixture.ca.signer(leaf: try Fixture.ca.issueLeaf(validity: .around(Fixture.now, days: 30))) }
        let tokens = try signers.map { try $0.sign(Fixture.transaction()) }
        DispatchQueue.concurrentPerform(iterations: 60) { i in
            XCTAssertEqual(try? v.verifyAndDecodeTransaction(tokens[i % 3]).transactionId, "2000000000000001")
        }
        XCTAssertEqual(v.chainCacheHits + v.chainCacheMisses, 60)
    }
}

/// When x5c[2] matches a pinned root by key only, the pinned root's dates rule, cached or not.
final class PinnedRootValidityTests: XCTestCase {
    static let day: TimeInterval = 86_400

    func testPinnedRootDatesRuleWhenX5cCarriesALongerLivedCopyOfIt() throws {
        let pinnedValidity = TestPKI.Validity(notBefore: Fixture.now.addingTimeInterval(-Self.day),
                                              notAfter: Fixture.now.addingTimeInterval(3650 * Self.day))
        let ca = try TestPKI.CertificateAuthority.make(validity: pinnedValidity, intermediateValidity: .around(Fixture.now, days: 3650))
        let copy = try ca.reissuedRoot(validity: .around(Fixture.now, days: 3650))
        let leaf = try ca.issueLeaf(validity: .around(Fixture.now, days: 365))
        let signer = TestPKI.JWSSigner(x5c: [leaf.der, ca.intermediate.der, copy.der], key: leaf.key)
        let v = try Fixture.verifier(roots: [ca.root.der])

        XCTAssertNoThrow(try v.verifyAndDecodeTransaction(try signer.sign(Fixture.transaction())))
        // Signed before the pinned root existed: the copy's earlier notBefore must not make it valid.
        let early = try signer.sign(Fixture.transaction(["signedDate": .int(Fixture.nowMs - 2 * 86_400_000)]))
        assertRefused(.certificateNotYetValid) { try v.verifyAndDecodeTransaction(early) }
        XCTAssertEqual(v.chainCacheHits, 1)
        assertRefused(.certificateNotYetValid) { try Fixture.verifier(roots: [ca.root.der]).verifyAndDecodeTransaction(early) }
    }
}
