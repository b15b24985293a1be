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
        /// The upstream asked us to wait longer than the remaining budget.
        case retryAfterBeyondBudget
        /// The next backoff would overrun the budget.
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
public struct RetryPolicy: Sendable {
    /// Attempts in total, the first included (1 = never retry).
    public var maxAttempts: Int
    public var baseDelay: Duration
    /// No single wait is longer than this, Retry-After included.
    public var maxDelay: Duration
    /// Fraction (0...1) of each backoff that is randomised away, so clients that failed together spread out.
    public var jitter: Double
    /// Total time the policy may spend waiting between attempts (attempt durations are not counted).
    public var budget: Duration

    public typealias Sleep = @Sendable (Duration) async throws -> Void

    public static let taskSleep: Sleep = { try await Task.sleep(for: $0) }

    public init(maxAttempts: Int = 3, baseDelay: Duration = .milliseconds(200), maxDelay: Duration = .seconds(2),
                jitter: Double = 0.2, budget: Duration = .seconds(5)) {
        self.maxAttempts = max(1, maxAttempts)
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.jitter = min(max(jitter, 0), 1)
        self.budget = budget
    }

    /// The wait before retry number `retry` (1-based): baseDelay·2^(retry−1), capped at maxDelay, then
    /// shortened by up to `jitter` of itself. `random` is in 0..<1.
    public func backoff(beforeRetry retry: Int, random: Double) -> Duration {
        let raw = ExponentialBackoff(base: baseDelay, cap: maxDelay).delay(beforeRetry: retry).secondsAsDouble
        let shortened = raw * (1 - jitter * min(max(random, 0), 1))
        return .nanoseconds(Int64((shortened * 1e9).rounded()))
    }

    /// Runs `operation` (given the 1-based attempt number) until it succeeds, fails for good, or the
    /// policy's attempts or budget run out. `sleep` and `random` are injectable so tests take no time.
    public func run<Success, Failure: Error>(
        isolation: isolated (any Actor)? = #isolation,
        sleep: Sleep = RetryPolicy.taskSleep,
        random: @Sendable () -> Double = { Double.random(in: 0..<1) },
        _ operation: (_ attempt: Int) async -> RetryDecision<Success, Failure>
    ) async throws(RetryGaveUp<Failure>) -> Success {
        var attempt = 1
        var waited: Duration = .zero
        while true {
            let decision = await operation(attempt)
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
            let remaining = budget - waited
            let delay: Duration
            if let retryAfter {
                guard retryAfter <= remaining else {
                    throw RetryGaveUp(lastError: lastError, attempts: attempt, reason: .retryAfterBeyondBudget,
                                      retryAfter: retryAfter)
                }
                delay = min(max(retryAfter, .zero), maxDelay)
            } else {
                delay = backoff(beforeRetry: attempt, random: random())
                guard delay <= remaining else {
                    throw RetryGaveUp(lastError: lastError, attempts: attempt, reason: .budgetExhausted, retryAfter: nil)
                }
            }
            do {
                try await sleep(delay)
            } catch {
                throw RetryGaveUp(lastError: lastError, attempts: attempt, reason: .cancelled, retryAfter: retryAfter)
            }
            waited += delay
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
