import XCTest
import IAPCore

final class HexTests: XCTestCase {
    func testEncodesTwoLowercaseDigitsPerByteAndDecodesEitherCase() {
        XCTAssertEqual(Hex.lowercase([0x00, 0x0f, 0xa0, 0xff]), "000fa0ff")
        XCTAssertEqual(Hex.bytes("000FA0ff"), [0x00, 0x0f, 0xa0, 0xff])
        XCTAssertEqual(Hex.bytes(""), [])
    }

    func testRefusesOddLengthsAndNonHexCharacters() {
        XCTAssertNil(Hex.bytes("abc"))
        XCTAssertNil(Hex.bytes("zz"))
        XCTAssertNil(Hex.bytes("0x"))
    }
}
