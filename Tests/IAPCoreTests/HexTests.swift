import XCTest
import IAPCore

final class HexTests: XCTestCase {
    func testEncodesTwoLowercaseDigitsPerByteAndDecodesEitherCase() {
        XCTAssertEqual(Hex.lowercase([0x00, 0x0f, 0xa0, 0xff]), "000fa0ff")
        XCTAssertEqual(Hex.bytes("000FA0ff"), [0x00, 0x0f, 0xa0, 0xff])
        XCTAssertEqual(Hex.bytes(""), [])
    }

    func testEveryByteEncodesAsItsTwoDigitsAndDecodesBack() {
        let all = (0...255).map { UInt8($0) }
        let text = Hex.lowercase(all)
        XCTAssertEqual(text, all.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined())
        XCTAssertEqual(Hex.bytes(text), all)
        XCTAssertEqual(Hex.lowercase(all[250...]), "fafbfcfdfeff")
    }

    func testRefusesOddLengthsAndNonHexCharacters() {
        XCTAssertNil(Hex.bytes("abc"))
        XCTAssertNil(Hex.bytes("zz"))
        XCTAssertNil(Hex.bytes("0x"))
    }
}
