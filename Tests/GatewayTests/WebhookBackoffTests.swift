import XCTest
@testable import Gateway

/// Background jobs (webhook deliveries, Finish Transaction) wait by the one `ExponentialBackoff`: 1 s
/// after the first failure, doubling, at most an hour, whatever the attempt count; Apple's
/// `Retry-After` when that is later.
final class WebhookBackoffTests: XCTestCase {
    func testDeliveryBackoffDoublesFromOneSecondToAnHour() {
        XCTAssertEqual((0...4).map(JobBackoff.delayMs(afterAttempts:)), [1_000, 2_000, 4_000, 8_000, 16_000])
        XCTAssertEqual(JobBackoff.delayMs(afterAttempts: 11), 2_048_000)
        XCTAssertEqual(JobBackoff.delayMs(afterAttempts: 12), 3_600_000)
        XCTAssertEqual(JobBackoff.delayMs(afterAttempts: Int.max - 1), 3_600_000)
        XCTAssertEqual(JobBackoff.delayMs(afterAttempts: -5), 1_000)
    }

    func testAppleRetryAfterIsHonouredWhenLongerThanTheBackoff() {
        XCTAssertEqual(JobBackoff.nextAttempt(afterAttempts: 0, retryAfterSeconds: 30, now: 5), 30_005)
        XCTAssertEqual(JobBackoff.nextAttempt(afterAttempts: 5, retryAfterSeconds: 1, now: 5), 32_005)
        XCTAssertEqual(JobBackoff.nextAttempt(afterAttempts: 1, now: 5), 2_005)
    }
}
