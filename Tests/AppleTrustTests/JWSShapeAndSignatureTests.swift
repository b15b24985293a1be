import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// Tampering, malformed encodings and header games: each refused with its exact code.
final class JWSShapeAndSignatureTests: XCTestCase {
    func testGenuineTestPKITransactionVerifies() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction())
        let t = try Fixture.verifier().verifyAndDecodeTransaction(jws)
        XCTAssertEqual(t.transactionId, "2000000000000001")
        XCTAssertEqual(t.price, 4990)
        XCTAssertEqual(t.type, .autoRenewable)
    }

    func testTamperedPayloadIsAnInvalidSignature() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction())
        let forged = Base64URL.encode(Array(Fixture.transaction(["price": 1]).jsonText.utf8))
        assertRefused(.invalidSignature) { try Fixture.verifier().verifyAndDecodeTransaction(replacingSegment(jws, 1, with: forged)) }
    }

    func testTamperedHeaderIsRefused() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction())
        // Same chain, an extra header field: the signature covers the header, so it no longer verifies.
        let other = try Fixture.signer.sign(Fixture.transaction(), headerOverrides: ["typ": "JWT"])
        assertRefused(.invalidSignature) { try Fixture.verifier().verifyAndDecodeTransaction(replacingSegment(jws, 0, with: segment(other, 0))) }
    }

    func testTamperedSignatureIsAnInvalidSignature() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction())
        var sig = try Base64URL.decode(segment(jws, 2))
        sig[10] ^= 0x01
        assertRefused(.invalidSignature) { try Fixture.verifier().verifyAndDecodeTransaction(replacingSegment(jws, 2, with: Base64URL.encode(sig))) }
    }

    func testSignatureOfWrongLengthIsAnInvalidSignature() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction())
        assertRefused(.invalidSignature) { try Fixture.verifier().verifyAndDecodeTransaction(replacingSegment(jws, 2, with: Base64URL.encode([UInt8](repeating: 1, count: 63)))) }
    }

    func testAlgorithmsOtherThanES256AreRefused() throws {
        for alg in ["none", "HS256", "ES384", "es256"] {
            let jws = try Fixture.signer.sign(Fixture.transaction(), headerOverrides: ["alg": .string(alg)])
            assertRefused(.unsupportedAlgorithm) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
        }
        let noAlg = try Fixture.signer.sign(Fixture.transaction(), headerOverrides: ["alg": .null])
        assertRefused(.unsupportedAlgorithm) { try Fixture.verifier().verifyAndDecodeTransaction(noAlg) }
    }

    func testChainsOfTwoOrFourCertificatesAreRefused() throws {
        let s = Fixture.signer
        let two = try TestPKI.signJWS(payload: Fixture.transaction(), chain: Array(s.x5c.prefix(2)), key: s.key)
        let four = try TestPKI.signJWS(payload: Fixture.transaction(), chain: s.x5c + [s.x5c[2]], key: s.key)
        let none = try s.sign(Fixture.transaction(), headerOverrides: ["x5c": .null])
        assertRefused(.invalidChainLength) { try Fixture.verifier().verifyAndDecodeTransaction(two) }
        assertRefused(.invalidChainLength) { try Fixture.verifier().verifyAndDecodeTransaction(four) }
        assertRefused(.invalidChainLength) { try Fixture.verifier().verifyAndDecodeTransaction(none) }
    }

    func testX5cEntriesMustBeCanonicalPaddedBase64() throws {
        let s = Fixture.signer
        var entries = s.x5c.map { JSONValue.string(Base64URL.encodeStandardPadded($0)) }
        entries[0] = .string(Base64URL.encode(s.x5c[0]))  // base64url, unpadded: not what RFC 7515 says
        let jws = try s.sign(Fixture.transaction(), headerOverrides: ["x5c": .array(entries)])
        assertRefused(.malformedBase64) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
    }

    func testDuplicateKeysInPayloadAreRefused() throws {
        let text = #"{"transactionId":"1","transactionId":"2","bundleId":"com.example.iapgw","signedDate":1,"environment":"Sandbox"}"#
        let jws = try TestPKI.signJWS(payloadText: text, chain: Fixture.signer.x5c, key: Fixture.leaf.key)
        assertRefused(.duplicateJSONKey) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
    }

    func testSignedDateAsStringIsAnInvalidFieldType() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction(["signedDate": .string(String(Fixture.nowMs))]))
        assertRefused(.invalidFieldType) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
    }

    func testPriceAsStringIsAnInvalidFieldType() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction(["price": "4990"]))
        assertRefused(.invalidFieldType) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
    }

    func testOversizedInputIsRefusedBeforeParsing() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction(["padding": .string(String(repeating: "a", count: 70_000))]))
        assertRefused(.inputTooLarge) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
    }

    func testTwoSegmentsOrEmptySegmentsAreMalformed() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction())
        let v = try Fixture.verifier()
        assertRefused(.malformedJWS) { try v.verifyAndDecodeTransaction(segment(jws, 0) + "." + segment(jws, 1)) }
        assertRefused(.malformedJWS) { try v.verifyAndDecodeTransaction(segment(jws, 0) + ".." + segment(jws, 2)) }
        assertRefused(.malformedJWS) { try v.verifyAndDecodeTransaction(jws + ".x") }
        assertRefused(.malformedJWS) { try v.verifyAndDecodeTransaction("") }
    }

    func testPaddingOrForeignCharactersInASegmentAreMalformedBase64() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction())
        let v = try Fixture.verifier()
        assertRefused(.malformedBase64) { try v.verifyAndDecodeTransaction(replacingSegment(jws, 1, with: segment(jws, 1) + "=")) }
        assertRefused(.malformedBase64) { try v.verifyAndDecodeTransaction(replacingSegment(jws, 1, with: "+" + segment(jws, 1).dropFirst())) }
        assertRefused(.malformedBase64) { try v.verifyAndDecodeTransaction(replacingSegment(jws, 2, with: segment(jws, 2) + "==")) }
    }
}

/// The malleability SignedDataVerifier documents: (r, n − s) verifies as well as (r, s), so two
/// different JWS strings carry one payload. Callers must dedupe on payload ids.
final class SignatureMalleabilityTests: XCTestCase {
    static let p256Order: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]

    static func negate(_ s: ArraySlice<UInt8>) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var borrow = 0
        for i in stride(from: 31, through: 0, by: -1) {
            var d = Int(p256Order[i]) - Int(s[s.startIndex + i]) - borrow
            borrow = d < 0 ? 1 : 0
            if d < 0 { d += 256 }
            out[i] = UInt8(d)
        }
        return out
    }

    func testTheOtherSOfAValidSignatureAlsoVerifiesSoJWSBytesAreNoDedupeKey() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction())
        let signature = try Base64URL.decode(segment(jws, 2))
        let twin = replacingSegment(jws, 2, with: Base64URL.encode(Array(signature[0..<32]) + Self.negate(signature[32..<64])))
        XCTAssertNotEqual(twin, jws)
        let v = try Fixture.verifier()
        XCTAssertEqual(try v.verifyAndDecodeTransaction(twin).transactionId, try v.verifyAndDecodeTransaction(jws).transactionId)
    }
}
