import Synchronization
import XCTest
@testable import UpstreamHTTP

private final class SleepRecorder: Sendable {
    private let recorded = Mutex<[Duration]>([])
    var sleeps: [Duration] { recorded.withLock { $0 } }
    var sleep: RetryPolicy.Sleep { { duration in self.recorded.withLock { $0.append(duration) } } }
}

private struct Failure: Error, Equatable { let attempt: Int }

final class RetryPolicyTests: XCTestCase {
    private let policy = RetryPolicy(maxAttempts: 4, baseDelay: .milliseconds(100), maxDelay: .milliseconds(250),
                                     jitter: 0.5, budget: .seconds(10))

    func testRetriesAreBoundedAndBackOffExponentiallyUpToMaxDelay() async {
        let recorder = SleepRecorder()
        let calls = Mutex(0)
        do {
            let _: Int = try await policy.run(sleep: recorder.sleep, random: { 0 }) { attempt in
                calls.withLock { $0 += 1 }
                return .retry(Failure(attempt: attempt))
            }
            XCTFail("expected to give up")
        } catch {
            XCTAssertEqual(error.reason, .attemptsExhausted)
            XCTAssertEqual(error.attempts, 4)
            XCTAssertEqual(error.lastError, Failure(attempt: 4))
        }
        XCTAssertEqual(calls.withLock { $0 }, 4)
        XCTAssertEqual(recorder.sleeps, [.milliseconds(100), .milliseconds(200), .milliseconds(250)])
    }

    func testJitterShortensTheBackoffByUpToItsFraction() {
        XCTAssertEqual(policy.backoff(beforeRetry: 1, random: 0.999_999_999), .milliseconds(50))
        XCTAssertEqual(policy.backoff(beforeRetry: 2, random: 0.5), .milliseconds(150))
        XCTAssertEqual(policy.backoff(beforeRetry: 40, random: 0), .milliseconds(250))
    }

    /// Issue 10 item 4: after a 429 with `Retry-After: 3` the retry came after 2 s (the backoff cap).
    /// A Retry-After replaces the backoff and is waited out in full, even beyond `maxDelay`.
    func testRetryAfterReplacesBackoffAndIsNeverShortened() async throws {
        let recorder = SleepRecorder()
        let value: String = try await policy.run(sleep: recorder.sleep, random: { 0 }) { attempt in
            switch attempt {
            case 1: return .retry(Failure(attempt: 1), retryAfter: .milliseconds(180))
            case 2: return .retry(Failure(attempt: 2), retryAfter: .seconds(3))
            default: return .success("done on \(attempt)")
            }
        }
        XCTAssertEqual(value, "done on 3")
        XCTAssertEqual(recorder.sleeps, [.milliseconds(180), .seconds(3)])
    }

    /// Issue 10 item 4: the budget is the run's whole time, attempts included (3 attempts of 15 s each
    /// took 45 s under a 5 s budget that only counted waits).
    func testAttemptsCountAgainstTheBudget() async {
        let tight = RetryPolicy(maxAttempts: 10, baseDelay: .milliseconds(50), maxDelay: .milliseconds(50), jitter: 0,
                                budget: .milliseconds(500))
        let recorder = SleepRecorder()
        let calls = Mutex(0)
        do {
            let _: Int = try await tight.run(sleep: recorder.sleep) { attempt in
                calls.withLock { $0 += 1 }
                try? await Task.sleep(for: .milliseconds(200))  // an attempt that takes its time
                return .retry(Failure(attempt: attempt))
            }
            XCTFail("expected to give up")
        } catch {
            XCTAssertEqual(error.reason, .budgetExhausted)
        }
        XCTAssertEqual(calls.withLock { $0 }, 2, "200 + 50 + 200 ms spent: a third attempt would overrun 500 ms")
    }

    /// Issue 10 item 4: within an enclosing deadline (a gateway request's budget), a Retry-After that
    /// does not fit what is left ends the run at once, carrying the upstream's value; each attempt runs
    /// under the nearer of the two ends.
    func testAnEnclosingDeadlineBoundsTheRunAndItsAttempts() async {
        let recorder = SleepRecorder()
        let seen = Mutex<[Duration]>([])
        let gaveUp: RetryGaveUp<Failure>? = await UpstreamDeadline.within(.seconds(2)) { () async -> RetryGaveUp<Failure>? in
            do throws(RetryGaveUp<Failure>) {
                let _: Int = try await policy.run(sleep: recorder.sleep) { attempt in
                    seen.withLock { $0.append(UpstreamDeadline.remaining ?? .seconds(-1)) }
                    return .retry(Failure(attempt: attempt), retryAfter: .seconds(3))
                }
                return nil
            } catch {
                return error
            }
        }
        XCTAssertEqual(gaveUp?.reason, .retryAfterBeyondBudget)
        XCTAssertEqual(gaveUp?.retryAfter, .seconds(3))
        XCTAssertEqual(gaveUp?.attempts, 1)
        XCTAssertEqual(recorder.sleeps, [], "no wait started that could not end in time")
        let left = seen.withLock { $0 }
        XCTAssertEqual(left.count, 1)
        XCTAssertTrue(left.allSatisfy { $0 > .zero && $0 <= .seconds(2) }, "the attempt ran under the request's end: \(left)")
        XCTAssertNil(UpstreamDeadline.current, "the deadline ends with its scope")
    }

    func testRetryAfterBeyondTheBudgetGivesUpAtOnceCarryingTheValue() async {
        let recorder = SleepRecorder()
        do {
            let _: Int = try await policy.run(sleep: recorder.sleep) { attempt in
                .retry(Failure(attempt: attempt), retryAfter: .seconds(120))
            }
            XCTFail("expected to give up")
        } catch {
            XCTAssertEqual(error.reason, .retryAfterBeyondBudget)
            XCTAssertEqual(error.retryAfter, .seconds(120))
            XCTAssertEqual(error.attempts, 1)
        }
        XCTAssertEqual(recorder.sleeps, [])
    }

    func testBackoffThatWouldOverrunTheBudgetGivesUpWithTheLastError() async {
        let tight = RetryPolicy(maxAttempts: 10, baseDelay: .milliseconds(100), maxDelay: .seconds(1), jitter: 0,
                                budget: .milliseconds(350))
        let recorder = SleepRecorder()
        do {
            let _: Int = try await tight.run(sleep: recorder.sleep) { attempt in .retry(Failure(attempt: attempt)) }
            XCTFail("expected to give up")
        } catch {
            XCTAssertEqual(error.reason, .budgetExhausted)
            XCTAssertEqual(error.lastError, Failure(attempt: 3))
            XCTAssertNil(error.retryAfter)
        }
        XCTAssertEqual(recorder.sleeps, [.milliseconds(100), .milliseconds(200)])
    }

    func testNonRetryableFailureStopsImmediately() async {
        let recorder = SleepRecorder()
        do {
            let _: Int = try await policy.run(sleep: recorder.sleep) { attempt in .fail(Failure(attempt: attempt)) }
            XCTFail("expected to give up")
        } catch {
            XCTAssertEqual(error.reason, .notRetryable)
            XCTAssertEqual(error.attempts, 1)
        }
        XCTAssertEqual(recorder.sleeps, [])
    }

    func testSleepInterruptedByCancellationGivesUp() async {
        do {
            let _: Int = try await policy.run(sleep: { _ in throw CancellationError() }) { attempt in
                .retry(Failure(attempt: attempt))
            }
            XCTFail("expected to give up")
        } catch {
            XCTAssertEqual(error.reason, .cancelled)
            XCTAssertEqual(error.lastError, Failure(attempt: 1))
        }
    }

    func testPolicyDrivesTheClientThroughTwo503sHonouringRetryAfterOnOneConnection() async throws {
        let served = Mutex(0)
        let server = try LoopbackServer { _ in
            let count = served.withLock { $0 += 1; return $0 }
            return count < 3 ? .respond(status: 503, headers: [("Retry-After", "1")]) : .respond(status: 200, body: [42])
        }
        defer { server.stop() }
        let client = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration())
        let recorder = SleepRecorder()
        let lenient = RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(100), maxDelay: .seconds(2), budget: .seconds(5))
        let body: [UInt8] = try await lenient.run(sleep: recorder.sleep) { _ in
            do throws(UpstreamError) {
                let response = try await client.send(UpstreamRequest(url: server.baseURL + "/inApps/v1/x"))
                if response.status == 503 { return .retry(UpstreamError.transport("503"), retryAfter: response.retryAfter) }
                return .success(response.body)
            } catch {
                return .transportFailure(error)
            }
        }
        XCTAssertEqual(body, [42])
        XCTAssertEqual(recorder.sleeps, [.seconds(1), .seconds(1)])
        XCTAssertEqual(server.acceptedConnections, 1)
    }
}
