import Dispatch
import Foundation
import Synchronization

/// Runs blocking calls (SQLite and libpq for the ledger, a start's file reads and database opening)
/// on threads of its own, never on Swift's cooperative pool (two threads on a 2-core machine: two stuck calls there
/// would stall every request, health probes included), the way `CurlEngine` runs libcurl.
///
/// Each call is awaited with a deadline: when it passes, the caller gets the executor's
/// `unavailable` code at once even though the thread may still be waiting (a frozen PostgreSQL, a
/// stalled disk, a hung mount); the late result is dropped. A call whose deadline passed before a thread took it is not
/// run at all. The queue is bounded: a full one refuses at once instead of piling up work nobody
/// waits for.
public final class BlockingExecutor: Sendable {
    public struct Limits: Sendable, Equatable {
        /// Dedicated threads: as many as the work can use at once (PostgreSQL: the pool size).
        public var threads: Int
        /// Calls waiting for a thread beyond which new ones are refused.
        public var queueCapacity: Int
        /// How long a caller waits for its call's answer.
        public var deadline: Duration
        /// How much longer a caller whose answer is held for a commit already sent waits for that
        /// commit's own answer (`FirstAnswer.holdForCommit`): a write whose COMMIT is on its way is
        /// answered with its outcome, not with a deadline that would say "not done" when it may be.
        public var commitWait: Duration

        public init(threads: Int, queueCapacity: Int = 256, deadline: Duration = .seconds(5),
                    commitWait: Duration = .seconds(15)) {
            self.threads = threads
            self.queueCapacity = queueCapacity
            self.deadline = deadline
            self.commitWait = commitWait
        }
    }

    public let limits: Limits
    /// What the work is, in refusals and thread names ("storage").
    public let purpose: String
    /// The code of a call refused or not answered in time.
    public let unavailable: VerificationError.Code
    private let queue: JobQueue
    private let deadlines = DeadlineWatch()

    public init(purpose: String, unavailable: VerificationError.Code, limits: Limits) {
        self.limits = limits
        self.purpose = purpose
        self.unavailable = unavailable
        queue = JobQueue(capacity: max(1, limits.queueCapacity), threads: max(1, limits.threads))
        for index in 0..<max(1, limits.threads) {
            // The thread holds the queue, not the executor: the executor's deinit stops it.
            let queue = queue
            startThread(named: "\(purpose).\(index)") { queue.work() }
        }
        let deadlines = deadlines
        startThread(named: "\(purpose).watch") { deadlines.watch() }
    }

    deinit {
        queue.stop()
        deadlines.stop()
    }

    /// Times the deadline watcher woke so far (tests: about one per `deadlineTolerance`, not one per call).
    var deadlineWakeups: Int { deadlines.wakeups }
    /// How late a call's deadline may be answered (see `DeadlineWatch.tolerance`).
    static var deadlineTolerance: Duration { DeadlineWatch.tolerance }

    /// Runs `body` on one of the executor's threads and answers within `deadline` (the executor's by default).
    public func run<R: Sendable>(deadline: Duration? = nil,
                                 _ body: @escaping @Sendable () throws(VerificationError) -> R)
        async throws(VerificationError) -> R {
        let (purpose, unavailable) = (purpose, unavailable)
        return try await awaitAnswer(deadline: deadline) { (answer: FirstAnswer<Result<R, VerificationError>>) in
            let accepted = queue.submit {
                // Answered already (the deadline passed while queued): nobody waits for this call.
                guard answer.isOpen else { return }
                answer.give(Result { () throws(VerificationError) -> R in try body() })
            }
            if !accepted { answer.give(.failure(VerificationError(unavailable, "\(purpose): too many calls waiting"))) }
        }
    }

    /// Runs `job` on one of the executor's threads without waiting for it: work that answers its
    /// callers itself, each waiting in `awaitAnswer` (a batch of calls written together). False
    /// when the queue is full or stopped.
    public func start(_ job: @escaping @Sendable () -> Void) -> Bool {
        queue.submit(job)
    }

    /// Hands `answer` to `give` (which passes it to work run or `start`ed on the executor) and waits
    /// for it, within `deadline` (the executor's by default), as `run` does. An answer held for a
    /// commit when the deadline passes waits up to `Limits.commitWait` longer for that commit.
    public func awaitAnswer<R: Sendable>(deadline: Duration? = nil,
                                         _ give: (FirstAnswer<Result<R, VerificationError>>) -> Void)
        async throws(VerificationError) -> R {
        let limit = deadline ?? limits.deadline
        let (purpose, unavailable, commitWait) = (purpose, unavailable, limits.commitWait)
        let deadlines = deadlines
        let result: Result<R, VerificationError> = await withCheckedContinuation { continuation in
            let answer = FirstAnswer(continuation)
            give(answer)
            let milliseconds = Int(limit / .milliseconds(1))
            deadlines.add(ContinuousClock.now + limit) {
                let late = VerificationError(unavailable, "\(purpose): no answer within \(milliseconds) ms")
                guard answer.expire(.failure(late)) == .heldForCommit else { return }
                deadlines.add(ContinuousClock.now + commitWait) {
                    // The one window left: a COMMIT sent and not answered for this long may or may not have taken effect.
                    // Only the ledger holds answers for commits: the code is storage's.
                    answer.give(.failure(VerificationError(.storageOutcomeUnknown, "\(purpose): a commit sent did not answer in time")))
                }
            }
        }
        return try result.get()
    }
}

/// Starts a thread of its own for `body`, named for `ps`, `top -H` and crash reports.
private func startThread(named name: String, _ body: @escaping @Sendable () -> Void) {
    let thread = Thread {
        nameThisThread(name)
        body()
    }
    thread.name = name
    thread.start()
}

/// The kernel's name of the calling thread (what `top -H` and perf show; Linux keeps 15 bytes):
/// Foundation's `Thread.name` does not reach it here, and a new thread otherwise inherits the name
/// of the thread that created it (a dispatch worker's), so profiles could not tell storage threads apart.
/// (pthread_setname_np is not imported into Swift on Linux; the thread's own comm file is the same call.)
private func nameThisThread(_ name: String) {
    let file = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard file >= 0 else { return }
    _ = Array(name.utf8.prefix(15)).withUnsafeBytes { write(file, $0.baseAddress, $0.count) }
    close(file)
}

/// A continuation resumed by whichever answer comes first (the call, its deadline, a refusal);
/// later answers are dropped. A write about to commit holds it first (`holdForCommit`): from then
/// on the deadline cannot answer, so a caller told "unavailable" is never one whose work commits.
public final class FirstAnswer<T: Sendable>: Sendable {
    private struct Slot {
        var continuation: CheckedContinuation<T, Never>?
        var heldForCommit = false
    }
    private let slot: Mutex<Slot>

    public init(_ continuation: CheckedContinuation<T, Never>) {
        slot = Mutex(Slot(continuation: continuation))
    }

    /// True until an answer was given.
    public var isOpen: Bool { slot.withLock { $0.continuation != nil } }

    /// Called before the COMMIT of the caller's work is sent: true if the caller still waits (and
    /// now waits for the commit, past its deadline); false if it was answered already, and so
    /// its work must not be committed.
    public func holdForCommit() -> Bool {
        slot.withLock { slot in
            guard slot.continuation != nil else { return false }
            slot.heldForCommit = true
            return true
        }
    }

    public func give(_ value: T) {
        let waiting = slot.withLock { slot -> CheckedContinuation<T, Never>? in
            defer { slot.continuation = nil }
            return slot.continuation
        }
        waiting?.resume(returning: value)
    }

    /// What a deadline found.
    public enum Expiry: Sendable {
        /// It answered the caller.
        case answered
        /// The caller was answered before.
        case alreadyAnswered
        /// A commit of the caller's work is on its way: the deadline gave no answer.
        case heldForCommit
    }

    /// A deadline's answer: given unless the caller was answered or its answer is held for a commit.
    public func expire(_ value: T) -> Expiry {
        let (waiting, expiry) = slot.withLock { slot -> (CheckedContinuation<T, Never>?, Expiry) in
            guard let waiting = slot.continuation else { return (nil, .alreadyAnswered) }
            if slot.heldForCommit { return (nil, .heldForCommit) }
            slot.continuation = nil
            return (waiting, .answered)
        }
        waiting?.resume(returning: value)
        return expiry
    }
}

/// The executor's bounded queue, shared by its threads.
private final class JobQueue: Sendable {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var head = 0
        var stopping = false
        var waiting: Int { jobs.count - head }
    }

    private let capacity: Int
    private let threads: Int
    private let state = Mutex(State())
    /// One signal per submitted job, and one per thread at stop.
    private let available = DispatchSemaphore(value: 0)

    init(capacity: Int, threads: Int) {
        self.capacity = capacity
        self.threads = threads
    }

    /// False when the queue is full or stopped.
    func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        let accepted = state.withLock { state -> Bool in
            guard !state.stopping, state.waiting < capacity else { return false }
            state.jobs.append(job)
            return true
        }
        if accepted { available.signal() }
        return accepted
    }

    /// A thread's loop: takes jobs until the queue stops.
    func work() {
        while true {
            available.wait()
            let job = state.withLock { state -> (@Sendable () -> Void)? in
                guard !state.stopping, state.head < state.jobs.count else { return nil }
                let job = state.jobs[state.head]
                state.head += 1
                // Compact now and then, so the array does not grow with every call ever made.
                if state.head > 64, state.head * 2 > state.jobs.count {
                    state.jobs.removeFirst(state.head)
                    state.head = 0
                }
                return job
            }
            guard let job else { return }
            job()
        }
    }

    /// Wakes every thread to end; jobs still queued are dropped (their callers get their deadline).
    func stop() {
        state.withLock { $0.stopping = true }
        // A semaphore keeps its count: a thread not started yet still finds its wake-up.
        for _ in 0..<threads { available.signal() }
    }
}

/// The deadlines of an executor's calls, kept in order and expired by one thread of its own, which
/// sleeps until the earliest. A timer per call (`DispatchQueue.asyncAfter`) would wake libdispatch's
/// manager thread on every call and a pool thread again when it fired: two thread switches per
/// storage call, for deadlines that almost never pass (profiled on `POST /verify`: Benchmarks/HISTORY.md).
private final class DeadlineWatch: @unchecked Sendable {
    private struct Entry {
        let deadline: ContinuousClock.Instant
        let expire: @Sendable () -> Void
    }

    /// How late a deadline may be expired, so that one wake-up expires every deadline within it.
    /// Calls nearly always answer long before their deadline, yet each leaves its entry: waking at
    /// each one to drop an answered call cost a thread switch per storage call (at 2,000 evenly
    /// paced re-claims/s, 10-11 switches and 410 µs of gateway CPU per request against 5-6 and
    /// 250 µs at the 64-connection peak). 10 ms late on a deadline of seconds changes nothing.
    static let tolerance: Duration = .milliseconds(10)

    /// Guards everything below; the watching thread waits on it.
    private let condition = NSCondition()
    /// In deadline order from `head` on (entries before it are expired, dropped now and then).
    private var entries: [Entry] = []
    private var head = 0
    private var stopping = false
    private var wokeUp = 0

    var wakeups: Int {
        condition.lock()
        defer { condition.unlock() }
        return wokeUp
    }

    func add(_ deadline: ContinuousClock.Instant, expire: @escaping @Sendable () -> Void) {
        condition.lock()
        defer { condition.unlock() }
        // Calls share their executor's deadline, so they nearly always arrive in order: appended.
        var index = entries.count
        while index > head, entries[index - 1].deadline > deadline { index -= 1 }
        entries.insert(Entry(deadline: deadline, expire: expire), at: index)
        // A new earliest deadline: the watcher sleeps until an older one, so wake it.
        if index == head { condition.signal() }
    }

    /// The watching thread: expires each entry at its deadline (answered calls ignore it). Once
    /// stopped it still expires those pending (calls the stopped queue dropped wait for them), then ends.
    func watch() {
        condition.lock()
        while true {
            guard head < entries.count else {
                if stopping { break }
                condition.wait()
                wokeUp += 1
                continue
            }
            let now = ContinuousClock.now
            let next = entries[head]
            guard next.deadline <= now else {
                _ = condition.wait(until: (next.deadline + Self.tolerance - now).fromNow)
                wokeUp += 1
                continue
            }
            head += 1
            if head > 64, head * 2 > entries.count {
                entries.removeFirst(head)
                head = 0
            }
            condition.unlock()
            next.expire()
            condition.lock()
        }
        condition.unlock()
    }

    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }
}
