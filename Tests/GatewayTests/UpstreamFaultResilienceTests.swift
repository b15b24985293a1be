import AppStoreSimulator
import Foundation
import IAPCore
import TestSupport
import UpstreamHTTP
import XCTest

/// Apple flaky, rate limiting, slow or hanging, over many verifications of good and bad evidence:
/// the verdict never changes (a good purchase is granted or 503, a bad one never granted), the
/// gateway's attempts stay within its retry policy, and 503 + Retry-After comes only when every
/// attempt the policy allowed met a fault.
final class UpstreamFaultResilienceTests: XCTestCase {
    private let maxAttempts = RetryPolicy().maxAttempts

    /// One verification the test repeats: its evidence and what it answers when Apple is healthy.
    private struct Case {
        let name: String
        let good: Bool
        let send: () async throws -> GatewayAnswer
        var baselineRequests = 0
        var baselineCode: String?
    }

    /// Good receipts and transaction ids, and bad evidence that reaches Apple (a receipt with a broken
    /// signature, an unknown transaction id, a refunded purchase), each verified once without faults.
    private func cases(_ gw: GatewayE2E, count: Int) async throws -> [Case] {
        var cases: [Case] = []
        for i in 0..<count {
            let account = "acct-\(i)"
            switch i % 6 {
            case 0, 1:
                let receipt = try gw.buy(owner: "device-\(i)").receiptBase64
                cases.append(Case(name: "good receipt \(i)", good: true) { try await gw.verifyReceipt(receipt, account: account) })
            case 2, 3:
                let id = try gw.buy(GatewayE2E.removeAds, owner: "device-\(i)").transactionId
                cases.append(Case(name: "good transactionId \(i)", good: true) { try await gw.verifyTransactionId(id, account: account) })
            case 4:
                var der = try XCTUnwrap(Data(base64Encoded: try gw.buy(owner: "device-\(i)").receiptBase64))
                der[der.count - 1] ^= 0x01  // the last byte of the PKCS#7 signature
                let forged = der.base64EncodedString()
                cases.append(Case(name: "forged receipt \(i)", good: false) { try await gw.verifyReceipt(forged, account: account) })
            default:
                let refunded = try gw.buy(GatewayE2E.removeAds, owner: "device-\(i)").transactionId
                _ = try gw.simulator.refund(transactionId: refunded)
                let id = i % 12 == 5 ? refunded : "2000000\(900_000 + i)"
                cases.append(Case(name: "\(id == refunded ? "refunded" : "unknown") transactionId \(i)", good: false) {
                    try await gw.verifyTransactionId(id, account: account)
                })
            }
        }
        for index in cases.indices {
            let before = gw.simulator.faults.counts
            let answer = try await cases[index].send()
            cases[index].baselineRequests = (gw.simulator.faults.counts - before).requests
            cases[index].baselineCode = answer.errorCode
            XCTAssertEqual(answer.status == 200, cases[index].good, "\(cases[index].name) without faults: \(answer.text)")
        }
        return cases
    }

    /// Verifies `c` under whatever faults are set and checks verdict, attempts and Retry-After.
    @discardableResult
    private func check(_ c: Case, _ gw: GatewayE2E, expectRetryAfter: String? = nil) async throws -> (GatewayAnswer, FaultCounts) {
        let before = gw.simulator.faults.counts
        let answer = try await c.send()
        let seen = gw.simulator.faults.counts - before
        XCTAssertLessThanOrEqual(seen.requests, maxAttempts * max(c.baselineRequests, 1),
                                 "\(c.name): attempts bounded by the retry policy")
        if answer.status == 503 {
            XCTAssertTrue(["UPSTREAM_UNAVAILABLE", "RATE_LIMITED"].contains(answer.errorCode ?? ""), "\(c.name): \(answer.text)")
            XCTAssertNotNil(answer.headers["retry-after"].flatMap { Int($0) }, "\(c.name): 503 carries Retry-After")
            XCTAssertGreaterThanOrEqual(seen.faulted, maxAttempts, "\(c.name): 503 only after every allowed attempt met a fault")
            if let expectRetryAfter { XCTAssertEqual(answer.headers["retry-after"], expectRetryAfter, c.name) }
        } else if c.good {
            XCTAssertEqual(answer.status, 200, "\(c.name): a good purchase is granted or 503, never refused: \(answer.text)")
        } else {
            XCTAssertNotEqual(answer.status, 200, "\(c.name): bad evidence granted")
            XCTAssertEqual(answer.errorCode, c.baselineCode, "\(c.name): the same refusal as without faults")
        }
        if seen.faulted == 0 { XCTAssertEqual(seen.requests, c.baselineRequests, "\(c.name): no fault, no retry") }
        return (answer, seen)
    }

    func testThirtyPercentRandom5xxNeverChangesAVerdictAndAnswers503OnlyWhenEveryAttemptFailed() async throws {
        let gw = try await GatewayE2E.start(self)
        let cases = try await cases(gw, count: 48)
        gw.simulator.faults.setVerifyReceiptFailure(.http503)
        gw.simulator.faults.setFailureRate(0.3, seed: 20261129)

        var statuses: [Int: Int] = [:]
        var retriedToSuccess = 0
        for c in cases {
            let (answer, seen) = try await check(c, gw)
            statuses[answer.status, default: 0] += 1
            if seen.faulted > 0 && answer.status != 503 { retriedToSuccess += 1 }
        }
        print("30% 5xx over \(cases.count) verifications: statuses \(statuses), \(retriedToSuccess) recovered by a retry")
        XCTAssertGreaterThan(retriedToSuccess, 5, "faults met and recovered from within the retry budget")
        XCTAssertGreaterThan(gw.simulator.faults.counts.faulted, 15, "the fault rate was in effect")
    }

    func testRateLimitBurstsAndSlowAnswersAreRetriedWithinBudgetAndPassOnRetryAfterWhenTheyOutlastIt() async throws {
        let gw = try await GatewayE2E.start(self)
        let cases = try await cases(gw, count: 12)
        gw.simulator.faults.setLatency(milliseconds: 300)  // slow, well below the gateway's 5 s timeout

        for (index, c) in cases.enumerated() {
            switch index % 4 {
            case 0:
                gw.simulator.faults.rateLimitNext(maxAttempts - 1, retryAfterSeconds: 1)
                let (answer, seen) = try await check(c, gw)
                XCTAssertEqual(seen.faulted, maxAttempts - 1, c.name)
                XCTAssertNotEqual(answer.status, 503, "\(c.name): the last allowed attempt got through")
            case 1 where index == 1:
                gw.simulator.faults.rateLimitNext(maxAttempts, retryAfterSeconds: 1)
                let (answer, _) = try await check(c, gw, expectRetryAfter: "1")
                XCTAssertEqual(answer.status, 503, c.name)
                XCTAssertEqual(answer.errorCode, "RATE_LIMITED", c.name)
            default:
                let (answer, seen) = try await check(c, gw)
                XCTAssertEqual(seen.faulted, 0, c.name)
                XCTAssertNotEqual(answer.status, 503, "\(c.name): a slow Apple is not an unavailable one")
            }
        }
        XCTAssertEqual(gw.simulator.faults.settings().rateLimitNext, 0, "every 429 was met")
    }

    func testAnUpstreamHangBeyondTheTimeoutIsAbandonedAndRetriedOnce() async throws {
        let gw = try await GatewayE2E.start(self)
        let cases = try await cases(gw, count: 4).filter(\.good)
        XCTAssertEqual(cases.count, 4)
        // One receipt and one transaction id meet a hang longer than the gateway's 5 s request timeout.
        for c in [cases[0], cases[2]] {
            gw.simulator.faults.hangNext(1, milliseconds: 6_500)
            let (answer, seen) = try await check(c, gw)
            XCTAssertEqual(answer.status, 200, "\(c.name): \(answer.text)")
            XCTAssertEqual(seen.requests, c.baselineRequests + 1, "\(c.name): the hung attempt, then the baseline")
        }
    }
}
