/// What a paced run measured, and whether the figure stands: a run whose generator sent late (its
/// own lag, not the server's) measured the generator, so its latency figure is refused.
public struct PaceSummary: Sendable, Equatable {
    public let offeredPerSecond: Double
    public let requests: Int
    public let achievedPerSecond: Double
    /// Latency from each request's due time to its whole response, in milliseconds, over every
    /// request that got a response (2xx or not).
    public let p50, p99, p999, max: Double
    /// From send to response (what a closed-loop tool reports): beside the figure, to show how much
    /// of it was waiting for a free connection.
    public let serviceP50, serviceP99: Double
    public let non2xx, timeouts, closed, badResponses, notSent, connectFailures: Int
    public let lagP99, lagMax: Double
    public let maxLagMs: Double
    public let t0MonotonicNanoseconds: Int64

    public var errors: Int { non2xx + timeouts + closed + badResponses + notSent + connectFailures }
    /// The generator kept its schedule: its own p99 lag within `maxLagMs`.
    public var keptPace: Bool { lagP99 <= maxLagMs }

    public init(_ run: Pacer.Run, maxLagMs: Double) {
        let records = run.records
        offeredPerSecond = run.options.rate
        requests = records.count
        let answered = records.filter { $0.failure == nil && $0.done >= 0 }
        let latencies = answered.map { Double($0.done - $0.due) / 1e6 }.sorted()
        let service = answered.map { Double($0.done - $0.sent) / 1e6 }.sorted()
        let lags = records.filter { $0.sent >= 0 }.map { Double($0.lag) / 1e6 }.sorted()
        let lastDone = records.map(\.done).max() ?? 0
        achievedPerSecond = lastDone > 0 ? Double(answered.count) / (Double(lastDone) / 1e9) : 0
        p50 = Self.percentile(latencies, 50)
        p99 = Self.percentile(latencies, 99)
        p999 = Self.percentile(latencies, 99.9)
        max = latencies.last ?? .nan
        serviceP50 = Self.percentile(service, 50)
        serviceP99 = Self.percentile(service, 99)
        non2xx = answered.filter { !(200...299).contains($0.status) }.count
        timeouts = records.filter { $0.failure == .timeout }.count
        closed = records.filter { $0.failure == .closed }.count
        badResponses = records.filter { $0.failure == .badResponse }.count
        notSent = records.filter { $0.failure == .notSent }.count
        connectFailures = run.connectFailures
        lagP99 = Self.percentile(lags, 99)
        lagMax = lags.last ?? .nan
        self.maxLagMs = maxLagMs
        t0MonotonicNanoseconds = run.t0MonotonicNanoseconds
    }

    /// Nearest rank: the smallest value with at least p% of the values at or below it.
    static func percentile(_ sorted: [Double], _ p: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        // Less a hair: 99.9% of 1,000 is 999.0000000000001 in binary floating point, rank 999 all the same.
        let rank = Int((p / 100 * Double(sorted.count) - 1e-9).rounded(.up))
        return sorted[Swift.max(0, Swift.min(sorted.count - 1, rank - 1))]
    }
}
