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

    func testRetryAfterReplacesBackoffAndIsCappedAtMaxDelay() async throws {
        let recorder = SleepRecorder()
        let value: String = try await policy.run(sleep: recorder.sleep, random: { 0 }) { attempt in
            switch attempt {
            case 1: return .retry(Failure(attempt: 1), retryAfter: .milliseconds(180))
            case 2: return .retry(Failure(attempt: 2), retryAfter: .seconds(3))
            default: return .success("done on \(attempt)")
            }
        }
        XCTAssertEqual(value, "done on 3")
        XCTAssertEqual(recorder.sleeps, [.milliseconds(180), .milliseconds(250)])
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
