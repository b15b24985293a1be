@testable import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// The chain cache keeps the SHA-256 state of the header's whole blocks (`SHA256Prefix`): the
/// digest a hit finishes from it must be the one-shot digest, and only ever for the same header.
final class HeaderHashTests: XCTestCase {
    /// Every prefix length around the block size (and Apple's real header length, 4,411) against
    /// every kind of rest: empty, within a block, across the padding boundary (55/56), whole blocks.
    func testFinishedDigestEqualsOneShotSHA256ForEveryPrefixAndRestLength() {
        let bytes = (0..<5_200).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ ($0 >> 7) &+ 7) }
        let prefixLengths = Array(0...200) + [4_350, 4_351, 4_352, 4_353, 4_411, 4_415, 4_416]
        let restLengths = [0, 1, 2, 54, 55, 56, 57, 63, 64, 65, 119, 120, 128, 581, 668]
        bytes.withUnsafeBytes { all in
            for prefix in prefixLengths {
                let state = SHA256Prefix(UnsafeRawBufferPointer(rebasing: all[0..<prefix]))
                XCTAssertEqual(state.coveredCount, prefix / 64 * 64)
                for rest in restLengths where prefix + rest <= all.count {
                    let message = UnsafeRawBufferPointer(rebasing: all[0..<(prefix + rest)])
                    var digest = [UInt8](repeating: 0, count: 32)
                    digest.withUnsafeMutableBufferPointer { state.finish(message, into: $0.baseAddress!) }
                    XCTAssertEqual(digest, SHA256Digest.hash(Array(message)), "prefix \(prefix), rest \(rest)")
                }
            }
        }
    }

    /// The state is copied per call: finishing twice, over different rests, gives each its own digest.
    func testOneStateServesManyMessages() {
        let header = [UInt8](repeating: 0x41, count: 300)
        let state = header.withUnsafeBytes { SHA256Prefix($0) }
        for tail in ["", ".a", ".bb", ".ccc"] {
            let message = header + Array(tail.utf8)
            var digest = [UInt8](repeating: 0, count: 32)
            message.withUnsafeBytes { m in digest.withUnsafeMutableBufferPointer { state.finish(m, into: $0.baseAddress!) } }
            XCTAssertEqual(digest, SHA256Digest.hash(message), "tail \(tail)")
        }
    }

    /// Two headers of the same length that agree on the cache's hashed prefix (the same bucket) and
    /// differ only inside the blocks the saved state covers. With the first cached, the second is a
    /// miss and verifies under its own bytes; the first's signature moved onto the second is refused.
    func testAHeaderDifferingInsideTheHashedBlocksNeverReusesAnotherHeadersState() throws {
        let pad = JSONValue.string(String(repeating: "p", count: 200))
        let first = try Fixture.signer.sign(Fixture.transaction(), headerOverrides: ["y": "A", "z": pad])
        let second = try Fixture.signer.sign(Fixture.transaction(), headerOverrides: ["y": "B", "z": pad])
        let h1 = Array(segment(first, 0).utf8), h2 = Array(segment(second, 0).utf8)
        XCTAssertEqual(h1.count, h2.count)
        XCTAssertEqual(h1.prefix(ExactBytes.hashedPrefix), h2.prefix(ExactBytes.hashedPrefix))
        let differing = (0..<h1.count).filter { h1[$0] != h2[$0] }
        XCTAssertFalse(differing.isEmpty)
        XCTAssertTrue(differing.allSatisfy { $0 >= ExactBytes.hashedPrefix && $0 < h1.count / 64 * 64 },
                      "the headers must differ only inside the hashed blocks, past the cache's hashed prefix")

        let v = try Fixture.verifier()
        XCTAssertNoThrow(try v.verifyAndDecodeTransaction(first))
        XCTAssertNoThrow(try v.verifyAndDecodeTransaction(first))
        XCTAssertEqual(v.chainCacheHits, 1)
        let forged = segment(second, 0) + "." + segment(first, 1) + "." + segment(first, 2)
        assertRefused(.invalidSignature) { try v.verifyAndDecodeTransaction(forged) }
        XCTAssertNoThrow(try v.verifyAndDecodeTransaction(second))
        XCTAssertEqual(v.chainCacheHits, 1, "a header equal to a cached one on the hashed prefix only is a miss")
        XCTAssertNoThrow(try v.verifyAndDecodeTransaction(second))
        XCTAssertEqual(v.chainCacheHits, 2)
    }

    /// Apple's real transaction: the warm path (digest finished from the cached state) accepts it
    /// with the same answer as the cold one, and refuses it once one byte of the payload changes.
    /// The signature memo is off, so the second call really verifies over the finished digest.
    func testRealAppleTransactionVerifiesTheSameWarmAndCold() throws {
        let jws = try AppleRealVectors.text(AppleRealVectors.sandboxConsumableTransaction)
        let warm = try Fixture.realSandboxVerifier(cacheCapacity: 64, signatureMemoCapacity: 0)
        let cold = try Fixture.realSandboxVerifier(cacheCapacity: 0).verifyAndDecodeTransaction(jws)
        XCTAssertEqual(try warm.verifyAndDecodeTransaction(jws), cold)
        XCTAssertEqual(try warm.verifyAndDecodeTransaction(jws), cold)
        XCTAssertEqual(warm.chainCacheHits, 1)
        var payload = try Base64URL.decode(segment(jws, 1))
        payload[payload.count - 3] ^= 0x01
        assertRefused(.invalidSignature) { try warm.verifyAndDecodeTransaction(replacingSegment(jws, 1, with: Base64URL.encode(payload))) }
        XCTAssertEqual(warm.chainCacheHits, 2)
    }
}
