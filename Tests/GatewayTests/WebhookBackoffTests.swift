import XCTest
@testable import Gateway

/// Webhook deliveries wait by the one `ExponentialBackoff`: 1 s after the first failure, doubling,
/// at most an hour, whatever the attempt count.
final class WebhookBackoffTests: XCTestCase {
    func testDeliveryBackoffDoublesFromOneSecondToAnHour() {
        XCTAssertEqual((0...4).map(WebhookDispatcher.backoffMs(afterAttempts:)), [1_000, 2_000, 4_000, 8_000, 16_000])
        XCTAssertEqual(WebhookDispatcher.backoffMs(afterAttempts: 11), 2_048_000)
        XCTAssertEqual(WebhookDispatcher.backoffMs(afterAttempts: 12), 3_600_000)
        XCTAssertEqual(WebhookDispatcher.backoffMs(afterAttempts: Int.max - 1), 3_600_000)
        XCTAssertEqual(WebhookDispatcher.backoffMs(afterAttempts: -5), 1_000)
    }
}
