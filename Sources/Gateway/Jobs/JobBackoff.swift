import IAPCore

/// When a failed background job (a webhook delivery, a Finish Transaction) is due again: 1 s after
/// its first failure, doubling, at most an hour; or when Apple's `Retry-After` says, if that is later
/// (never sooner than Apple asked).
enum JobBackoff {
    static let schedule = ExponentialBackoff(base: .seconds(1), cap: .seconds(3600))

    /// The wait after a job's `attempts`-th failed attempt counted from 0 (the first failure: 0).
    static func delayMs(afterAttempts attempts: Int) -> Int64 {
        schedule.delay(beforeRetry: attempts + 1).wholeMilliseconds
    }

    static func nextAttempt(afterAttempts attempts: Int, retryAfterSeconds: Int? = nil, now: Int64) -> Int64 {
        now + max(delayMs(afterAttempts: attempts), Int64(retryAfterSeconds ?? 0) * 1000)
    }
}
