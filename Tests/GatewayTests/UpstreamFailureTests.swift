import AppStoreSimulator
import Foundation
import IAPCore
import TestSupport
import XCTest

/// Apple misbehaving or refusing the gateway: bounded retries, honest statuses, Retry-After.
final class UpstreamFailureTests: XCTestCase {
    func testRejectedSharedSecretIsAConfigurationErrorAndTheSecretIsNotEchoed() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")
        let simulatorSecret = "rotated-" + UUID().uuidString
        try gw.rotateSimulatorSharedSecret(to: simulatorSecret)

        let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: "alice")

        assertRefused(answer, 502, "UPSTREAM_CREDENTIALS_REJECTED")
        XCTAssertFalse(answer.text.contains(gw.harness.sharedSecret))
        XCTAssertFalse(answer.text.contains(simulatorSecret))
    }

    func testWrongSharedSecretFileIsAConfigurationErrorAndTheSecretIsNotEchoed() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")
        let wrong = "wrong-secret-" + UUID().uuidString
        try gw.rewriteSecretFile("shared-secret", wrong)

        let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: "alice")

        assertRefused(answer, 502, "UPSTREAM_CREDENTIALS_REJECTED")
        XCTAssertFalse(answer.text.contains(wrong))
        XCTAssertFalse(answer.text.contains(gw.harness.sharedSecret))
    }

    func testVerifyReceiptFailingEveryAttemptIsRetriedABoundedNumberOfTimesThen503WithRetryAfter() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")
        gw.simulator.faults.setVerifyReceiptFailure(.http503)

        try await assertEveryAttemptFailingIsRetriedThreeTimesThen503(gw) {
            try await gw.verifyReceipt(purchase.receiptBase64, account: "alice")
        }
    }

    func testServerAPIFailingEveryAttemptIsRetriedABoundedNumberOfTimesThen503WithRetryAfter() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")

        try await assertEveryAttemptFailingIsRetriedThreeTimesThen503(gw) {
            try await gw.verifyTransactionId(purchase.transactionId, account: "bob")
        }
    }

    /// Makes the next 10 calls to Apple fail, then `verify`: the default retry policy spends 3 of
    /// them, and the answer is 503 UPSTREAM_UNAVAILABLE with a Retry-After.
    private func assertEveryAttemptFailingIsRetriedThreeTimesThen503(
        _ gw: GatewayE2E, _ verify: () async throws -> GatewayAnswer, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        gw.simulator.faults.failNext(10)

        let answer = try await verify()

        assertRefused(answer, 503, "UPSTREAM_UNAVAILABLE", file: file, line: line)
        XCTAssertNotNil(answer.headers["retry-after"].flatMap { Int($0) }, file: file, line: line)
        let attempts = 10 - gw.simulator.faults.settings().failNext
        XCTAssertEqual(attempts, 3, "the default retry policy makes 3 attempts", file: file, line: line)
    }

    func testRateLimitedServerAPIIsRetriedThen503WithRetryAfter() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")
        gw.simulator.faults.rateLimitNext(10, retryAfterSeconds: 1)

        let answer = try await gw.verifyTransactionId(purchase.transactionId, account: "bob")

        assertRefused(answer, 503, "RATE_LIMITED")
        XCTAssertEqual(answer.headers["retry-after"], "1")
        let attempts = 10 - gw.simulator.faults.settings().rateLimitNext
        XCTAssertEqual(attempts, 3)
    }

    func testRateLimitLongerThanTheRetryBudgetIsPassedOnAsRetryAfterWithoutWaiting() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")
        gw.simulator.faults.rateLimitNext(10, retryAfterSeconds: 120)

        let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: "alice")

        assertRefused(answer, 503, "RATE_LIMITED")
        XCTAssertEqual(answer.headers["retry-after"], "120", "Apple's own wait, passed on")
        XCTAssertEqual(10 - gw.simulator.faults.settings().rateLimitNext, 1, "no retry Apple asked us not to make")
    }

    func testTransientVerifyReceiptFailureFollowedBySuccessIsGranted() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")
        gw.simulator.faults.setVerifyReceiptFailure(.http503)
        gw.simulator.faults.failNext(1)

        let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: "alice")

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(gw.simulator.faults.settings().failNext, 0, "the failure was met and retried")
    }

    func testTransientServerAPIFailureFollowedBySuccessIsGranted() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")
        gw.simulator.faults.failNext(1)

        let answer = try await gw.verifyTransactionId(purchase.transactionId, account: "bob")

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(gw.simulator.faults.settings().failNext, 0)
    }
}
