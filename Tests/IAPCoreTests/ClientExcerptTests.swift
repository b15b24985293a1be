import IAPCore
import XCTest

final class ClientExcerptTests: XCTestCase {
    func testControlFormatAndMarkupCharactersAreWrittenAsQuestionMarks() {
        XCTAssertEqual(ClientExcerpt.of("ANYONE10\u{2063}\u{7}"), "ANYONE10??")
        XCTAssertEqual(ClientExcerpt.of("com.example.monthly\u{0}<script>"), "com.example.monthly??script?")
        XCTAssertEqual(ClientExcerpt.of("a\"b\\c'd`e&f\r\n\t"), "a?b?c?d?e?f???")
        XCTAssertEqual(ClientExcerpt.of("é🙂"), "??", "one ? per Unicode scalar")
    }

    func testPrintableInputIsKeptAsItIs() {
        let ids = "com.example.pro_monthly-2 (v1.2) #7 @ 50% off: [x]/{y}+=~!?*,;"
        XCTAssertEqual(ClientExcerpt.of(ids), ids)
    }

    func testAnExcerptIsBounded() {
        XCTAssertEqual(ClientExcerpt.of(String(repeating: "x", count: 1000)).count, ClientExcerpt.defaultLimit)
        XCTAssertEqual(ClientExcerpt.of(String(repeating: "y", count: 1000), limit: 200).count, 200)
        XCTAssertEqual(ClientExcerpt.of("abc", limit: 0), "")
    }

    func testAnUnknownAppRefusalQuotesTheBundleIdAsAnExcerpt() {
        let error = VerificationError.unknownApp("com.evil\u{0}<img src=x>")
        XCTAssertEqual(error.code, .unknownApp)
        XCTAssertEqual(error.message, "no app com.evil??img src=x? is configured")
    }
}
