/// The end of the time one piece of work may spend on upstream calls: for a gateway request, every
/// call, attempt and wait it makes, so the request answers within its one budget however many calls
/// it needs. A task-local, so calls in child tasks see it too; `RetryPolicy.run` narrows it to its
/// own budget, and `UpstreamHTTPClient` cuts each transfer's timeouts to what is left.
public enum UpstreamDeadline {
    @TaskLocal public static var current: ContinuousClock.Instant?

    /// Runs `body` with a deadline `budget` from now, or the enclosing one if that comes sooner.
    public static func within<R>(_ budget: Duration, isolation: isolated (any Actor)? = #isolation,
                                 _ body: () async -> R) async -> R {
        let end = ContinuousClock.now.advanced(by: budget)
        return await $current.withValue(min(end, current ?? end), operation: body)
    }

    /// What is left of the current deadline (negative once it passed); nil outside any.
    public static var remaining: Duration? { current.map { ContinuousClock.now.duration(to: $0) } }
}
