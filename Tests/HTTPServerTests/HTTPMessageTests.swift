@testable import HTTPServer
import XCTest

/// The request and response values, exercised without a socket.
final class HTTPMessageTests: XCTestCase {
    func testHeaderLookupIgnoresCaseAndKeepsRepeatedValues() {
        var headers: HTTPHeaders = ["Content-Type": "application/json"]
        headers.add(name: "Accept", value: "a")
        headers.add(name: "ACCEPT", value: "b")
        XCTAssertEqual(headers["content-type"], "application/json")
        XCTAssertEqual(headers["accept"], "a")
        XCTAssertEqual(headers.values(for: "Accept"), ["a", "b"])
        XCTAssertNil(headers["Content-Typ"])
    }

    func testPathSegmentsAreDecodedAndBrokenEscapesRefused() {
        XCTAssertEqual(HTTPRequest(method: "GET", path: "/v1//apps/com.x%2Fy/%C3%A9").pathSegments,
                       ["v1", "apps", "com.x/y", "é"])
        XCTAssertNil(HTTPRequest(method: "GET", path: "/v1/%G1").pathSegments)
        XCTAssertNil(HTTPRequest(method: "GET", path: "/v1/%C3").pathSegments, "a lone UTF-8 lead byte")
        XCTAssertEqual(HTTPRequest(method: "GET", path: "/").pathSegments, [])
    }

    func testQueryParsingDecodesAndKeepsTheFirstOfARepeatedName() {
        XCTAssertEqual(PercentDecoding.parseQuery("a=1&b=x+y&a=2&flag&c=%26"), ["a": "1", "b": "x y", "flag": "", "c": "&"])
        XCTAssertNil(PercentDecoding.parseQuery("a=%2"))
    }

    func testRequestIdFromHeaderIsKeptOnlyWhenSane() {
        XCTAssertEqual(HTTPRequest(method: "GET", path: "/", headers: ["x-request-id": "abc-1.2_3"]).requestId, "abc-1.2_3")
        let replaced = HTTPRequest(method: "GET", path: "/", headers: ["X-Request-Id": "a b"]).requestId
        XCTAssertNotEqual(replaced, "a b")
        XCTAssertEqual(replaced.count, 32)
        XCTAssertFalse(RequestID.isSane(""))
        XCTAssertFalse(RequestID.isSane("é"))
        XCTAssertTrue(RequestID.isSane(String(repeating: "z", count: 64)))
    }

    func testErrorResponseIsTheGatewayEnvelopeWithEscapedMessage() {
        let response = HTTPResponse.error(413, code: "INPUT_TOO_LARGE", message: "too \"big\"\n\u{1}")
        XCTAssertEqual(response.status, 413)
        XCTAssertEqual(response.headers.first?.0, "Content-Type")
        XCTAssertEqual(response.headers.first?.1, "application/json")
        XCTAssertEqual(String(decoding: response.body, as: UTF8.self),
                       #"{"error":{"code":"INPUT_TOO_LARGE","message":"too \"big\"\n\u0001","retryable":false}}"#)
    }

    func testConfigurationWithHostNameOrBadLimitsIsRefused() {
        XCTAssertThrowsError(try HTTPServer(configuration: .init(host: "localhost", port: 0)) { _ in .json(200, "{}") }) {
            XCTAssertEqual(($0 as? HTTPServerError)?.kind, .invalidConfiguration)
        }
        XCTAssertThrowsError(try HTTPServer(configuration: .init(port: 70000)) { _ in .json(200, "{}") }) {
            XCTAssertEqual(($0 as? HTTPServerError)?.kind, .invalidConfiguration)
        }
        XCTAssertNoThrow(try HTTPServer(configuration: .init(host: "::1", port: 0)) { _ in .json(200, "{}") })
    }

    func testHandlerIsAPlainAsyncFunction() async {
        let handler: HTTPHandler = { request in .json(201, "{\"id\":\"\(request.requestId)\"}") }
        let response = await handler(HTTPRequest(method: "POST", path: "/x", requestId: "fixed"))
        XCTAssertEqual(response.status, 201)
        XCTAssertEqual(String(decoding: response.body, as: UTF8.self), "{\"id\":\"fixed\"}")
    }
}
