import XCTest

/// The refusal a test expects: the HTTP status (the body is the failure message, so a wrong answer
/// says what it was) and the stable error code.
public func assertRefused(_ answer: GatewayAnswer, _ status: Int, _ code: String,
                             file: StaticString = #filePath, line: UInt = #line) {
    XCTAssertEqual(answer.status, status, answer.text, file: file, line: line)
    XCTAssertEqual(answer.errorCode, code, file: file, line: line)
}
