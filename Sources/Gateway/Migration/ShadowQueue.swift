import Synchronization

/// Where the comparisons the answer does not wait for run (the second path of `shadow` and of a
/// `cutover` spot check): at most `concurrency` at a time, at most `limit` waiting or running.
/// Beyond the limit a comparison is dropped (and `onDrop` counts it): when Apple or storage is
/// slow, shadow work must not pile up without end behind the traffic that caused it. Shutdown
/// stops taking new work and waits for what was taken (`drain`).
final class ShadowQueue: Sendable {
    typealias Job = @Sendable () async -> Void

    static let defaultConcurrency = 8

    private struct State {
        var waiting: [Job] = []
        var running = 0
        var closed = false
        var drained: [CheckedContinuation<Void, Never>] = []
    }

    let limit: Int
    let concurrency: Int
    private let onDrop: @Sendable () -> Void
    private let state = Mutex(State())

    init(limit: Int, concurrency: Int = ShadowQueue.defaultConcurrency,
         onDrop: @escaping @Sendable () -> Void = {}) {
        precondition(limit >= 1 && concurrency >= 1)
        self.limit = limit
        self.concurrency = concurrency
        self.onDrop = onDrop
    }

    /// Takes `job` unless the queue is full or shut; false: dropped.
    @discardableResult
    func submit(_ job: @escaping Job) -> Bool {
        enum Decision { case start, queued, dropped }
        let decision = state.withLock { s -> Decision in
            guard !s.closed, s.waiting.count + s.running < limit else { return .dropped }
            guard s.running < concurrency else { s.waiting.append(job); return .queued }
            s.running += 1
            return .start
        }
        switch decision {
        case .dropped:
            onDrop()
            return false
        case .queued:
            return true
        case .start:
            // Detached: the request's task-locals (its upstream budget) do not bind work it does not wait for.
            Task.detached(priority: .utility) { [self] in await work(first: job) }
            return true
        }
    }

    /// Jobs waiting or running now.
    var depth: Int { state.withLock { $0.waiting.count + $0.running } }

    /// Stops taking work and returns once every job taken has finished.
    func drain() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let idle = state.withLock { s -> Bool in
                s.closed = true
                if s.running == 0 && s.waiting.isEmpty { return true }
                s.drained.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }

    /// One worker: runs `first`, then whatever waits, until nothing does.
    private func work(first: @escaping Job) async {
        var job: Job? = first
        while let next = job {
            await next()
            let (following, done) = state.withLock { s -> (Job?, [CheckedContinuation<Void, Never>]) in
                if !s.waiting.isEmpty { return (s.waiting.removeFirst(), []) }
                s.running -= 1
                guard s.running == 0, s.closed else { return (nil, []) }
                let done = s.drained
                s.drained = []
                return (nil, done)
            }
            for continuation in done { continuation.resume() }
            job = following
        }
    }
}
