import AppleTrust
import IAPCore
import XCTest

final class Base64URLTests: XCTestCase {
    func testRoundTripsEveryLengthModuloThree() throws {
        for n in 0..<40 {
            let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 250) }
            XCTAssertEqual(try Base64URL.decode(Base64URL.encode(bytes)), bytes)
            XCTAssertEqual(try Base64URL.decodeStandardPadded(Base64URL.encodeStandardPadded(bytes)), bytes)
        }
    }

    func testNonCanonicalInputIsRefused() {
        for bad in ["A", "AB=", "AB==", "AB+C", "AB/C", "AB C", "AB\nC", "AF", "AAB", "QUJD\u{0}"] {
            XCTAssertThrowsError(try Base64URL.decode(bad), bad) { XCTAssertEqual(($0 as? VerificationError)?.code, .malformedBase64) }
        }
        XCTAssertEqual(try Base64URL.decode("AA"), [0])
        XCTAssertEqual(try Base64URL.decode("_-8"), [0xFF, 0xEF])
    }

    func testStandardDecoderRequiresPaddingAndItsAlphabet() {
        XCTAssertEqual(try Base64URL.decodeStandardPadded("+/8="), [0xFB, 0xFF])
        for bad in ["+/8", "-_8=", "AB=C", "A===", "AF==", "AAB="] {
            XCTAssertThrowsError(try Base64URL.decodeStandardPadded(bad), bad) { XCTAssertEqual(($0 as? VerificationError)?.code, .malformedBase64) }
        }
    }
}

final class HMACSHA256Tests: XCTestCase {
    /// RFC 4231 test case 2.
    func testMatchesRFC4231() {
        XCTAssertEqual(HMACSHA256.hex(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8)),
                       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }
}
