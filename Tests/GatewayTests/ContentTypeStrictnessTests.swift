import Foundation
import IAPCore
import TestSupport
import XCTest

/// A payment API reads JSON only when the client says it sends JSON: every other or missing media
/// type is a clear 400 `MALFORMED_REQUEST` (the documented code; the status stays 400 so no client
/// keyed on it breaks), never a guess.
final class ContentTypeStrictnessTests: XCTestCase {
    private func verify(_ gw: GatewayE2E, contentType: String?) async -> GatewayAnswer {
        await gw.handle("POST", "/v1/apps/\(gw.bundleId)/verify",
                        body: Array(#"{"account":"alice","transactionId":"2000000000000001"}"#.utf8), contentType: contentType)
    }

    func testVerifyWithAMissingOrNonJSONContentTypeIsRefused400MalformedRequest() async throws {
        let gw = try await GatewayE2E.start(self)
        for contentType in [nil, "", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                            "application/jsonp", "application/json-seq", "application/json5", "text/json",
                            "application/json; charset=iso-8859-1", "application/json; charset=utf-16"] {
            let answer = await verify(gw, contentType: contentType)
            XCTAssertEqual(answer.status, 400, "\(contentType ?? "no Content-Type")")
            XCTAssertEqual(answer.errorCode, "MALFORMED_REQUEST", "\(contentType ?? "no Content-Type")")
        }
    }

    func testVerifyWithJSONContentTypeInAnyCaseAndUTF8CharsetIsRead() async throws {
        let gw = try await GatewayE2E.start(self)
        for contentType in ["application/json", "Application/JSON", "application/json; charset=utf-8", "application/json;charset=UTF-8"] {
            let answer = await verify(gw, contentType: contentType)
            XCTAssertNotEqual(answer.errorCode, "MALFORMED_REQUEST", "\(contentType): the body was read")
            XCTAssertEqual(answer.errorCode, "TRANSACTION_NOT_FOUND", "\(contentType): the unknown transaction reached Apple")
        }
    }
}
