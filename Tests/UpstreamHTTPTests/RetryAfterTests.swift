import XCTest
@testable import UpstreamHTTP

final class RetryAfterTests: XCTestCase {
    /// RFC 9110's example instant, Sun, 06 Nov 1994 08:49:37 GMT.
    private let rfcExample = 784_111_777

    func testAllThreeHTTPDateFormsParseToTheSameInstant() {
        XCTAssertEqual(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"), rfcExample)
        XCTAssertEqual(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT"), rfcExample)
        XCTAssertEqual(HTTPDate.parse("Sun Nov  6 08:49:37 1994"), rfcExample)
        XCTAssertEqual(HTTPDate.parse("Thu, 01 Jan 1970 00:00:00 GMT"), 0)
        XCTAssertEqual(HTTPDate.parse("Tue, 29 Feb 2028 23:59:59 GMT"), 1_835_481_599)
    }

    func testMalformedHTTPDatesAreRejected() {
        for text in ["Sun, 31 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:49:37 PST",
                     "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "Mon, 29 Feb 2027 00:00:00 GMT",
                     "yesterday", ""] {
            XCTAssertNil(HTTPDate.parse(text), text)
        }
    }

    func testDeltaSecondsAreTakenAsGiven() {
        XCTAssertEqual(RetryAfter.seconds(from: "120", nowUnixTime: 0), 120)
        XCTAssertEqual(RetryAfter.seconds(from: " 0 ", nowUnixTime: 0), 0)
        XCTAssertEqual(RetryAfter.seconds(from: "99999999999999999999", nowUnixTime: 0), RetryAfter.maximumSeconds)
        for bad in ["-1", "1.5", "+3", "12s", ""] {
            XCTAssertNil(RetryAfter.seconds(from: bad, nowUnixTime: 0), bad)
        }
    }

    func testHTTPDateBecomesSecondsFromNowAndPastDatesMeanNow() {
        let now = Double(rfcExample) - 30
        XCTAssertEqual(RetryAfter.seconds(from: "Sun, 06 Nov 1994 08:49:37 GMT", nowUnixTime: now), 30)
        XCTAssertEqual(RetryAfter.seconds(from: "Sun, 06 Nov 1994 08:49:37 GMT", nowUnixTime: now + 0.5), 30)
        XCTAssertEqual(RetryAfter.seconds(from: "Sun, 06 Nov 1994 08:49:37 GMT", nowUnixTime: now + 3600), 0)
    }

    func testResponseReadsRetryAfterHeader() {
        let withSeconds = UpstreamResponse(status: 503, headers: ["retry-after": "7"], body: [])
        XCTAssertEqual(withSeconds.retryAfterSeconds, 7)
        XCTAssertEqual(withSeconds.retryAfter, .seconds(7))
        let withDate = UpstreamResponse(status: 429, headers: ["retry-after": "Sun, 06 Nov 1994 08:50:37 GMT"], body: [])
        XCTAssertEqual(withDate.retryAfterSeconds(nowUnixTime: Double(rfcExample)), 60)
        XCTAssertNil(UpstreamResponse(status: 503, headers: [:], body: []).retryAfterSeconds)
    }

    func testRetryAfterArrivesThroughTheClientAndAnHTTPDateInTheFutureIsHonoured() async throws {
        let server = try LoopbackServer { _ in .respond(status: 503, headers: [("Retry-After", "Fri, 01 Jan 2100 00:00:00 GMT")]) }
        defer { server.stop() }
        let client = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration())
        let response = try await client.send(UpstreamRequest(url: server.baseURL + "/"))
        XCTAssertEqual(response.status, 503)
        XCTAssertEqual(response.retryAfterSeconds(nowUnixTime: 4_102_444_800 - 90), 90)
    }
}
