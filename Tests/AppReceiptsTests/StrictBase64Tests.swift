import AppReceipts
import Foundation
import IAPCore
import XCTest

final class StrictBase64Tests: XCTestCase {
    func decodeCode(_ text: String) -> VerificationError.Code? {
        do { _ = try StrictBase64.decode(text); return nil } catch { return error.code }
    }

    func testDecodesStandardBase64WithPadding() throws {
        XCTAssertEqual(try StrictBase64.decode("TWFu"), Array("Man".utf8))
        XCTAssertEqual(try StrictBase64.decode("TWE="), Array("Ma".utf8))
        XCTAssertEqual(try StrictBase64.decode("TQ=="), Array("M".utf8))
        XCTAssertEqual(try StrictBase64.decode("+/+/"), [0xFB, 0xFF, 0xBF])
    }

    func testToleratesOnlyCRLFLineWrapping() throws {
        XCTAssertEqual(try StrictBase64.decode("TW\r\nFu\n"), Array("Man".utf8))
        XCTAssertEqual(decodeCode("TW Fu"), .malformedBase64)
        XCTAssertEqual(decodeCode("TW\tFu"), .malformedBase64)
    }

    func testRefusesNonCanonicalBase64() {
        XCTAssertEqual(decodeCode("TWE"), .malformedBase64)        // padding missing
        XCTAssertEqual(decodeCode("TR=="), .malformedBase64)       // stray bits before padding
        XCTAssertEqual(decodeCode("TWF="), .malformedBase64)
        XCTAssertEqual(decodeCode("T=E="), .malformedBase64)       // padding inside
        XCTAssertEqual(decodeCode("TQ==TQ=="), .malformedBase64)
        XCTAssertEqual(decodeCode("-_-_"), .malformedBase64)       // base64url alphabet
        XCTAssertEqual(decodeCode("===="), .malformedBase64)
    }

    func testRefusesOversizedInputBeforeDecoding() {
        XCTAssertThrowsError(try StrictBase64.decode("TWFuTWFu", maxInputBytes: 7)) {
            XCTAssertEqual(($0 as? VerificationError)?.code, .inputTooLarge)
        }
    }
}
