/// The one exponential backoff every retry loop waits by (upstream calls, the notification inbox,
/// webhook deliveries, batch compare's 429 pauses): `base · 2^(retry − 1)` before the retry-th
/// retry, never more than `cap`. Callers add what is theirs (jitter, Retry-After, a clock).
public struct ExponentialBackoff: Hashable, Sendable {
    public var base: Duration
    public var cap: Duration

    public init(base: Duration, cap: Duration) {
        self.base = max(base, .zero)
        self.cap = max(cap, .zero)
    }

    /// The wait before retry number `retry` (1-based; 0 and below count as the first).
    public func delay(beforeRetry retry: Int) -> Duration {
        var delay = base
        // Doubling stops at the cap (or after 64 rounds for a zero base), so no retry count overflows.
        var doublings = min(max(retry - 1, 0), 64)
        while doublings > 0 && delay < cap {
            delay = delay * 2
            doublings -= 1
        }
        return min(delay, cap)
    }
}

extension Duration {
    /// Whole milliseconds, rounded down (for ledgers and clocks that count in milliseconds).
    public var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
