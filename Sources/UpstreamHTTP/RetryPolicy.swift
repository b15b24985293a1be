import IAPCore
/// What one attempt of an operation concluded.
public enum RetryDecision<Success, Failure: Error> {
    case success(Success)
    /// Worth another attempt; `retryAfter` is the upstream's Retry-After, when it sent one.
    case retry(Failure, retryAfter: Duration? = nil)
    /// Not worth another attempt (a 4xx, a TLS failure, a verification answer).
    case fail(Failure)
}

/// Thrown when `RetryPolicy.run` stops without success. `retryAfter` carries the upstream's wait when the
/// policy gave up because of it, so a caller can answer 503 with the same Retry-After.
public struct RetryGaveUp<Failure: Error>: Error {
    public enum Reason: Sendable, Equatable {
        case notRetryable
        case attemptsExhausted
        /// The upstream asked us to wait at least as long as the budget has left.
        case retryAfterBeyondBudget
        /// The next backoff would use up the budget.
        case budgetExhausted
        case cancelled
    }

    public let lastError: Failure
    public let attempts: Int
    public let reason: Reason
    public let retryAfter: Duration?
}

/// Bounded retries with exponential backoff and jitter, honouring Retry-After. Generic over the error so
/// it serves HTTP transport errors, verifyReceipt statuses and Server API error codes alike.
///
/// Time is bounded twice over: by `budget` (attempts and waits together), and by the enclosing
/// `UpstreamDeadline` (a gateway request's one budget for all its calls), whichever ends first; each
/// attempt runs under that end, so the HTTP client cuts its timeouts to it. An upstream's Retry-After is
/// waited out in full, never shortened: when the time left is not longer than the wait it asks for,
/// the policy gives up at once and hands the Retry-After on (the gateway's 503 carries it).
public struct RetryPolicy: Sendable {
    /// Attempts in total, the first included (1 = never retry).
    public var maxAttempts: Int
    public var baseDelay: Duration
    /// No backoff is longer than this (a Retry-After is taken as the upstream gave it).
    public var maxDelay: Duration
    /// Fraction (0...1) of each backoff that is randomised away, so clients that failed together spread out.
    public var jitter: Double
    /// Total time one `run` may take: its attempts and the waits between them.
    public var budget: Duration

    public typealias Sleep = @Sendable (Duration) async throws -> Void

    public static let taskSleep: Sleep = { try await Task.sleep(for: $0) }

    public init(maxAttempts: Int = 3, baseDelay: Duration = .milliseconds(200), maxDelay: Duration = .seconds(2),
                jitter: Double = 0.2, budget: Duration = .seconds(20)) {
        self.maxAttempts = max(1, maxAttempts)
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.jitter = min(max(jitter, 0), 1)
        self.budget = budget
    }

    /// The wait before retry number `retry` (1-based): baseDelay·2^(retry−1), capped at maxDelay, then
    /// shortened by up to `jitter` of itself. `random` is in 0..<1.
    public func backoff(beforeRetry retry: Int, random: Double) -> Duration {
        let raw = ExponentialBackoff(base: baseDelay, cap: maxDelay).delay(beforeRetry: retry).timeInterval
        let shortened = raw * (1 - jitter * min(max(random, 0), 1))
        return .nanoseconds(Int64((shortened * 1e9).rounded()))
    }

    /// Runs `operation` (given the 1-based attempt number) until it succeeds, fails for good, or the
    /// policy's attempts or time run out. `sleep` and `random` are injectable so tests take no time:
    /// the budget counts each attempt as long as it took and each wait as long as it was asked to be.
    public func run<Success, Failure: Error>(
        isolation: isolated (any Actor)? = #isolation,
        sleep: Sleep = RetryPolicy.taskSleep,
        random: @Sendable () -> Double = { Double.random(in: 0..<1) },
        _ operation: (_ attempt: Int) async -> RetryDecision<Success, Failure>
    ) async throws(RetryGaveUp<Failure>) -> Success {
        var attempt = 1
        var spent: Duration = .zero
        let enclosing = UpstreamDeadline.current
        /// What is left: of this run's budget, and of the enclosing deadline.
        func remaining() -> Duration {
            let own = budget - spent
            return enclosing.map { min(own, ContinuousClock.now.duration(to: $0)) } ?? own
        }
        while true {
            let started = ContinuousClock.now
            let decision = await UpstreamDeadline.$current.withValue(started.advanced(by: remaining())) {
                await operation(attempt)
            }
            spent += started.duration(to: .now)
            let lastError: Failure
            let retryAfter: Duration?
            switch decision {
            case .success(let value):
                return value
            case .fail(let failure):
                throw RetryGaveUp(lastError: failure, attempts: attempt, reason: .notRetryable, retryAfter: nil)
            case .retry(let failure, let after):
                lastError = failure
                retryAfter = after
            }
            guard attempt < maxAttempts else {
                throw RetryGaveUp(lastError: lastError, attempts: attempt, reason: .attemptsExhausted, retryAfter: retryAfter)
            }
            let left = remaining()
            let delay: Duration
            if let retryAfter {
                // Never sooner than asked; and a retry with no time left after the wait is no retry.
                guard retryAfter < left else {
                    throw RetryGaveUp(lastError: lastError, attempts: attempt, reason: .retryAfterBeyondBudget,
                                      retryAfter: retryAfter)
                }
                delay = max(retryAfter, .zero)
            } else {
                delay = backoff(beforeRetry: attempt, random: random())
                guard delay < left else {
                    throw RetryGaveUp(lastError: lastError, attempts: attempt, reason: .budgetExhausted, retryAfter: nil)
                }
            }
            do {
                try await sleep(delay)
            } catch {
                throw RetryGaveUp(lastError: lastError, attempts: attempt, reason: .cancelled, retryAfter: retryAfter)
            }
            spent += delay
            attempt += 1
        }
    }
}

extension RetryDecision where Failure == UpstreamError {
    /// The usual reading of a transport outcome: retry what `isRetryable` says, carrying no Retry-After.
    public static func transportFailure(_ error: UpstreamError) -> RetryDecision {
        error.isRetryable ? .retry(error) : .fail(error)
    }
}
