import AppleTrust
import Foundation
import Gateway
import IAPGatewayClient
import XCTest

/// The client derives the same appAccountToken as the gateway checks, with its own SHA-256.
final class AppAccountTokenTests: XCTestCase {
    func testOwnSHA256MatchesOpenSSLAcrossBlockBoundaries() {
        var generator = SystemRandomNumberGenerator()
        // 55, 56, 63, 64, 65 bytes straddle the padding's length field and the block size.
        for length in Array(0...130) + [1_000, 4_096] {
            let message = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            XCTAssertEqual(IAPGatewaySHA256.hash(message), SHA256Digest.hash(message), "length \(length)")
        }
    }

    func testSHA256KnownAnswers() {
        // FIPS 180-4's examples.
        XCTAssertEqual(hex(IAPGatewaySHA256.hash(Array("abc".utf8))),
                       "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(hex(IAPGatewaySHA256.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    func testTokenIsTheGatewaysDerivation() {
        let cases = [("com.example.demo", "alice"), ("com.example.demo", "user 42/ä€😀"), ("a", "b"),
                     ("com.example.demo", String(repeating: "x", count: 256)), ("com.other.app", "alice")]
        for (bundleId, account) in cases {
            let token = appAccountToken(bundleId: bundleId, account: account, sha256: IAPGatewaySHA256.hash)
            XCTAssertEqual(token.uuidString.lowercased(), AppAccountToken.derive(bundleId: bundleId, account: account))
            let bytes = withUnsafeBytes(of: token.uuid) { Array($0) }
            XCTAssertEqual(bytes[6] >> 4, 8, "version 8")
            XCTAssertEqual(bytes[8] >> 6, 0b10, "RFC 9562 variant")
        }
        XCTAssertNotEqual(appAccountToken(bundleId: "com.example.demo", account: "alice", sha256: IAPGatewaySHA256.hash),
                          appAccountToken(bundleId: "com.example.demo", account: "bob", sha256: IAPGatewaySHA256.hash))
        // Any SHA-256 gives the same token (an app passes CryptoKit's).
        XCTAssertEqual(appAccountToken(bundleId: "com.example.demo", account: "alice", sha256: { SHA256Digest.hash($0) }),
                       appAccountToken(bundleId: "com.example.demo", account: "alice", sha256: IAPGatewaySHA256.hash))
    }

    private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
}
