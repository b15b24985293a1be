import IAPCore
import XCTest

/// The one backoff every retry loop waits by: doubling from its base, capped, never overflowing.
final class ExponentialBackoffTests: XCTestCase {
    func testDoublesFromTheBaseBeforeEachRetryUpToTheCap() {
        let backoff = ExponentialBackoff(base: .milliseconds(200), cap: .seconds(2))
        XCTAssertEqual((1...6).map(backoff.delay(beforeRetry:)),
                       [.milliseconds(200), .milliseconds(400), .milliseconds(800), .milliseconds(1600), .seconds(2), .seconds(2)])
        XCTAssertEqual(backoff.delay(beforeRetry: 0), .milliseconds(200), "retry 0 and below count as the first")
        XCTAssertEqual(backoff.delay(beforeRetry: -3), .milliseconds(200))
    }

    func testHugeRetryCountsAndDegenerateBoundsStayFinite() {
        XCTAssertEqual(ExponentialBackoff(base: .seconds(1), cap: .seconds(3600)).delay(beforeRetry: .max), .seconds(3600))
        XCTAssertEqual(ExponentialBackoff(base: .zero, cap: .seconds(1)).delay(beforeRetry: .max), .zero)
        XCTAssertEqual(ExponentialBackoff(base: .seconds(5), cap: .seconds(1)).delay(beforeRetry: 1), .seconds(1),
                       "the cap wins over a larger base")
        XCTAssertEqual(ExponentialBackoff(base: .seconds(-1), cap: .seconds(1)).delay(beforeRetry: 3), .zero)
    }

    func testWholeMillisecondsRoundDown() {
        XCTAssertEqual(Duration.milliseconds(1500).wholeMilliseconds, 1500)
        XCTAssertEqual(Duration.microseconds(2999).wholeMilliseconds, 2)
        XCTAssertEqual(Duration.seconds(3600).wholeMilliseconds, 3_600_000)
    }
}
