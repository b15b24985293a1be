@testable import AppleTrust
import Foundation
import IAPCore
import Synchronization
import TestPKI
import XCTest

/// The memo of verified signatures inside a chain entry (`VerifiedSignatureMemo`): a hit only for
/// the exact (digest, signature) pair that verified under that entry's leaf key, the verdict always
/// the cold one, and every check after the signature still run on every call.
final class SignatureMemoTests: XCTestCase {
    /// The entry the verifier holds for this JWS's header (looking it up counts as a chain-cache hit).
    private func memo(_ v: SignedDataVerifier, _ jws: String) -> VerifiedSignatureMemo? {
        Array(segment(jws, 0).utf8).withUnsafeBufferPointer { v.cache.lookup($0)?.verifiedSignatures }
    }

    private func withSignature(_ jws: String, _ change: (inout [UInt8]) -> Void) throws -> String {
        var signature = try Base64URL.decode(segment(jws, 2))
        change(&signature)
        return replacingSegment(jws, 2, with: Base64URL.encode(signature))
    }

    /// Apple's real transaction: the second call is a memo hit and answers exactly as a verifier
    /// without any cache; one payload byte changed is a miss, verified, refused and not remembered.
    func testRealAppleTransactionSecondCallIsAMemoHitWithTheColdAnswer() throws {
        let jws = try AppleRealVectors.text(AppleRealVectors.sandboxConsumableTransaction)
        let cold = try Fixture.realSandboxVerifier(cacheCapacity: 0).verifyAndDecodeTransaction(jws)
        let warm = try Fixture.realSandboxVerifier(cacheCapacity: 64)
        XCTAssertEqual(try warm.verifyAndDecodeTransaction(jws), cold)
        XCTAssertEqual(warm.signatureMemoHits, 0, "the first call verifies")
        XCTAssertEqual(try warm.verifyAndDecodeTransaction(jws), cold)
        XCTAssertEqual(warm.signatureMemoHits, 1, "the second call is a memo hit")
        var payload = try Base64URL.decode(segment(jws, 1))
        payload[payload.count - 3] ^= 0x01
        assertRefused(.invalidSignature) { try warm.verifyAndDecodeTransaction(replacingSegment(jws, 1, with: Base64URL.encode(payload))) }
        XCTAssertEqual(warm.signatureMemoHits, 1)
        XCTAssertEqual(memo(warm, jws)?.count, 1, "only the pair that verified is remembered")
    }

    /// Same digest, another signature: a wrong s is refused (a memo keyed on the digest alone would
    /// accept it); the high-S twin (r, n − s), which OpenSSL accepts, is accepted as a cold verifier
    /// accepts it, by a real verify the first time and from its own memo pair after.
    func testSameDigestWithAnotherSignatureGetsTheColdVerdict() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction())
        let wrongS = try withSignature(jws) { $0[63] ^= 0x01 }
        let twin = try withSignature(jws) { $0 = Array($0[0..<32]) + SignatureMalleabilityTests.negate($0[32..<64]) }
        let cold = try Fixture.verifier(cacheCapacity: 0)
        let expected = try cold.verifyAndDecodeTransaction(twin)
        assertRefused(.invalidSignature) { try cold.verifyAndDecodeTransaction(wrongS) }

        let v = try Fixture.verifier()
        XCTAssertNoThrow(try v.verifyAndDecodeTransaction(jws))
        assertRefused(.invalidSignature) { try v.verifyAndDecodeTransaction(wrongS) }
        assertRefused(.invalidSignature) { try v.verifyAndDecodeTransaction(wrongS) }
        XCTAssertEqual(v.signatureMemoHits, 0)
        XCTAssertEqual(memo(v, jws)?.count, 1, "a signature that failed is never remembered")
        XCTAssertEqual(try v.verifyAndDecodeTransaction(twin), expected)
        XCTAssertEqual(v.signatureMemoHits, 0, "the twin is another pair: verified, not a hit")
        XCTAssertEqual(try v.verifyAndDecodeTransaction(twin), expected)
        XCTAssertEqual(v.signatureMemoHits, 1)
        XCTAssertEqual(memo(v, jws)?.count, 2)
    }

    /// A remembered signature moved onto another payload (same header) is refused: the digest is
    /// the call's own (a memo keyed on the signature alone would accept it).
    func testARememberedSignatureOnAnotherPayloadIsRefused() throws {
        let first = try Fixture.signer.sign(Fixture.transaction())
        let second = try Fixture.signer.sign(Fixture.transaction(["transactionId": "2000000000000002"]))
        XCTAssertEqual(segment(first, 0), segment(second, 0), "one header, one chain entry")
        let v = try Fixture.verifier()
        XCTAssertNoThrow(try v.verifyAndDecodeTransaction(first))
        XCTAssertNoThrow(try v.verifyAndDecodeTransaction(first))
        XCTAssertEqual(v.signatureMemoHits, 1)
        assertRefused(.invalidSignature) { try v.verifyAndDecodeTransaction(replacingSegment(second, 2, with: segment(first, 2))) }
        XCTAssertEqual(v.signatureMemoHits, 1)
    }

    /// Each chain entry has its own memo: a signature remembered under one header is no hit under
    /// another (another leaf key, or the same leaf in other header bytes), and each entry holds
    /// only what verified under it.
    func testOneChainEntrysMemoServesNoOtherHeader() throws {
        let otherLeaf = try Fixture.ca.issueLeaf(validity: .around(Fixture.now, days: 365))
        let first = try Fixture.signer.sign(Fixture.transaction())
        let otherKey = try Fixture.ca.signer(leaf: otherLeaf).sign(Fixture.transaction())
        let otherBytes = try Fixture.signer.sign(Fixture.transaction(), headerOverrides: ["kid": "other"])
        let v = try Fixture.verifier()
        XCTAssertNoThrow(try v.verifyAndDecodeTransaction(first))
        XCTAssertNoThrow(try v.verifyAndDecodeTransaction(first))
        XCTAssertEqual(v.signatureMemoHits, 1)
        for other in [otherKey, otherBytes] {
            XCTAssertNoThrow(try v.verifyAndDecodeTransaction(other))  // caches the other header
            assertRefused(.invalidSignature) {
                try v.verifyAndDecodeTransaction(segment(other, 0) + "." + segment(first, 1) + "." + segment(first, 2))
            }
            XCTAssertEqual(v.signatureMemoHits, 1, "no hit under another header")
            XCTAssertEqual(memo(v, other)?.count, 1)
        }
        XCTAssertEqual(memo(v, first)?.count, 1)
        XCTAssertFalse(memo(v, first) === memo(v, otherKey))
    }

    /// A hit skips only the signature: signedDate against the clock and the registered claims are
    /// checked again on the call that hits.
    func testEveryCheckAfterTheSignatureRunsOnAHit() throws {
        final class Clock: @unchecked Sendable { let now = Mutex(Fixture.now) }
        let clock = Clock()
        let v = try SignedDataVerifier(rootCertificates: [Fixture.ca.root.der], bundleId: Fixture.bundleId,
                                       appAppleId: Fixture.appAppleId, environments: [.sandbox],
                                       now: { clock.now.withLock { $0 } })
        let expSeconds = Int64(Fixture.now.timeIntervalSince1970) + 10
        let jws = try Fixture.signer.sign(Fixture.transaction(["exp": .int(expSeconds)]))
        XCTAssertNoThrow(try v.verifyAndDecodeTransaction(jws))
        clock.now.withLock { $0 = Fixture.now.addingTimeInterval(-120) }  // signedDate 2 min ahead, skew 1 min
        assertRefused(.signedDateInFuture) { try v.verifyAndDecodeTransaction(jws) }
        XCTAssertEqual(v.signatureMemoHits, 1)
        clock.now.withLock { $0 = Fixture.now.addingTimeInterval(20) }
        assertRefused(.jwtExpired) { try v.verifyAndDecodeTransaction(jws) }
        XCTAssertEqual(v.signatureMemoHits, 2)
        clock.now.withLock { $0 = Fixture.now }
        XCTAssertNoThrow(try v.verifyAndDecodeTransaction(jws))
        XCTAssertEqual(v.signatureMemoHits, 3)
    }

    /// Bounded first-in-first-out: with room for two, a third signature evicts the first, which is
    /// then verified again (and still accepted); capacity 0 remembers nothing.
    func testTheMemoIsBoundedAndCapacityZeroRemembersNothing() throws {
        let signed = try (1...3).map { i in
            try Fixture.signer.sign(Fixture.transaction(["transactionId": .string("200000000000000\(i)")]))
        }
        let v = try SignedDataVerifier(rootCertificates: [Fixture.ca.root.der], bundleId: Fixture.bundleId,
                                       appAppleId: Fixture.appAppleId, environments: [.sandbox],
                                       now: { Fixture.now }, signatureMemoCapacity: 2)
        for jws in signed { XCTAssertNoThrow(try v.verifyAndDecodeTransaction(jws)) }
        XCTAssertEqual(memo(v, signed[0])?.count, 2)
        XCTAssertNoThrow(try v.verifyAndDecodeTransaction(signed[2]))
        XCTAssertEqual(v.signatureMemoHits, 1)
        XCTAssertNoThrow(try v.verifyAndDecodeTransaction(signed[0]))
        XCTAssertEqual(v.signatureMemoHits, 1, "the evicted first pair is verified again")

        let none = try SignedDataVerifier(rootCertificates: [Fixture.ca.root.der], bundleId: Fixture.bundleId,
                                          appAppleId: Fixture.appAppleId, environments: [.sandbox],
                                          now: { Fixture.now }, signatureMemoCapacity: 0)
        for _ in 0..<3 { XCTAssertNoThrow(try none.verifyAndDecodeTransaction(signed[0])) }
        XCTAssertEqual(none.signatureMemoHits, 0)
    }

    /// Many threads on one entry, good, twin and forged signatures interleaved: every call gets the
    /// cold verdict, and the memo ends holding exactly the two pairs that verify.
    func testConcurrentCallsGetTheColdVerdictEveryTime() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction())
        let twin = try withSignature(jws) { $0 = Array($0[0..<32]) + SignatureMalleabilityTests.negate($0[32..<64]) }
        let forged = try withSignature(jws) { $0[40] ^= 0x80 }
        let inputs = [(jws, true), (twin, true), (forged, false)]
        let v = try Fixture.verifier()
        let wrong = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 600) { i in
            let (input, valid) = inputs[i % inputs.count]
            let accepted = (try? v.verifyAndDecodeTransaction(input)) != nil
            if accepted != valid { wrong.add(1, ordering: .relaxed) }
        }
        XCTAssertEqual(wrong.load(ordering: .relaxed), 0)
        XCTAssertEqual(memo(v, jws)?.count, 2)
        XCTAssertGreaterThan(v.signatureMemoHits, 0)
    }
}
