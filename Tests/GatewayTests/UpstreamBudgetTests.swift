import AppStoreSimulator
import Foundation
import IAPCore
import TestSupport
import XCTest

/// Issue 10 item 4: Apple's Retry-After is honoured exactly, and one request spends no more than its
/// one budget (`timeouts.budgetSeconds`) on Apple, however many attempts its timeouts would allow.
/// Driven through the gateway's HTTP API against the simulator's faults, for both kinds of evidence.
final class UpstreamBudgetTests: XCTestCase {
    /// Before: retried after 2 s (the backoff cap) when Apple asked for 3.
    func testARetryIsNeverSentBeforeApplesRetryAfter() async throws {
        let gw = try await GatewayE2E.start(self)
        for kind in ["receipt", "transactionId"] {
            let before = gw.simulator.faults.counts
            let (answer, took) = try await verify(kind, gw, account: "a") {
                gw.simulator.faults.rateLimitNext(1, retryAfterSeconds: 3)
            }
            XCTAssertEqual(answer.status, 200, "\(kind): \(answer.text)")
            XCTAssertEqual((gw.simulator.faults.counts - before).faulted, 1, kind)
            XCTAssertGreaterThanOrEqual(took, .seconds(3), "\(kind): the retry waited out Apple's Retry-After")
        }
    }

    /// Before: with a wait budget of its own (5 s) the policy waited 2 s and tried again, past the request's 2 s.
    func testARetryAfterBeyondTheRequestsBudgetIsAnswered503AtOnceWithApplesRetryAfter() async throws {
        let gw = try await GatewayE2E.start(self) { $0.upstreamBudgetSeconds = 2 }
        for kind in ["receipt", "transactionId"] {
            let before = gw.simulator.faults.counts
            let (answer, took) = try await verify(kind, gw, account: "b") {
                gw.simulator.faults.rateLimitNext(1, retryAfterSeconds: 3)
            }
            XCTAssertLessThan(took, .seconds(2), "\(kind): answered at once, not after a wait")
            XCTAssertEqual(answer.status, 503, "\(kind): \(answer.text)")
            XCTAssertEqual(answer.errorCode, "RATE_LIMITED", kind)
            XCTAssertEqual(answer.headers["retry-after"], "3", "\(kind): Apple's own Retry-After")
            XCTAssertEqual((gw.simulator.faults.counts - before).requests, 1, "\(kind): no second attempt")
            gw.simulator.faults.rateLimitNext(0)
        }
    }

    /// Before: three attempts of the 5 s request timeout each (plus backoff), 15 s and more for one request.
    func testOneRequestAnswersWithinItsBudgetWhenAppleHangs() async throws {
        let gw = try await GatewayE2E.start(self) { $0.upstreamBudgetSeconds = 3 }
        for kind in ["receipt", "transactionId"] {
            let (answer, took) = try await verify(kind, gw, account: "c") {
                gw.simulator.faults.hangNext(10, milliseconds: 30_000)
            }
            XCTAssertEqual(answer.status, 503, "\(kind): \(answer.text)")
            XCTAssertEqual(answer.errorCode, "UPSTREAM_UNAVAILABLE", kind)
            XCTAssertNotNil(answer.headers["retry-after"], kind)
            XCTAssertLessThan(took, .seconds(5), "\(kind): within the 3 s budget (and some slack), took \(took)")
            gw.simulator.faults.hangNext(0, milliseconds: 0)
        }
    }

    /// A new purchase of `kind` ("receipt" or "transactionId") verified for `account` once `fault` is
    /// set (after the purchase, so only the verification meets it), and how long the answer took.
    private func verify(_ kind: String, _ gw: GatewayE2E, account: String, fault: () -> Void) async throws
        -> (GatewayAnswer, Duration) {
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-\(account)-\(kind)")
        let nonce = kind == "receipt" ? try await gw.nonce(for: "\(account)-\(kind)") : nil
        fault()
        let started = ContinuousClock.now
        let answer = if let nonce {
            try await gw.post("verify", ["account": .string("\(account)-\(kind)"), "receipt": .string(purchase.receiptBase64),
                                         "nonce": .string(nonce)])
        } else {
            try await gw.verifyTransactionId(purchase.transactionId, account: "\(account)-\(kind)")
        }
        return (answer, ContinuousClock.now - started)
    }
}
