import Foundation
@testable import Gateway
import XCTest

/// `NotificationDecoder.canonicalV2` takes the parse-free path only for a body of base64url and
/// dots (issue 14 made its byte check branch-free): every byte value, at the start, inside the
/// vectorised middle and in the tail of Apple's real notification, is classified as before.
final class CanonicalV2BodyTests: XCTestCase {
    func testEveryByteValueAnywhereInARealJWSIsTakenOnlyIfItIsBase64URLOrADot() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("shared/testdata/apple-real/production-test-notification.jws")
        let jws = try String(contentsOf: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let body = Array(("{\"signedPayload\":\"" + jws + "\"}").utf8)
        XCTAssertEqual(NotificationDecoder.canonicalV2(body), jws)
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.".utf8)
        let start = 18, end = body.count - 3
        for value in UInt8.min...UInt8.max {
            for position in [start, start + 1, (start + end) / 2, end - 1, end] {
                var changed = body
                changed[position] = value
                XCTAssertEqual(NotificationDecoder.canonicalV2(changed) != nil, allowed.contains(value),
                               "byte \(value) at \(position) of \(body.count)")
            }
        }
    }
}
