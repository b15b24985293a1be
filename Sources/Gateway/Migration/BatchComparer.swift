import Adapters
import AppleTrust
import Foundation
import IAPConfig
import IAPCore
import Ledger

/// Runs a backlog of stored receipts through both generations (verifyReceipt and the Server API
/// migration path), directly through the adapters, and stores each side-by-side comparison in the
/// ledger exactly as the gateway's compare routing does.
///
/// - At most `concurrency` receipts are in flight. The adapters already honour one `Retry-After`;
///   a receipt that still ends RATE_LIMITED is not a finding about the migration, so it is put back
///   (after a growing pause that also holds back new launches) and recorded as failed only after
///   `maxRateLimitAttempts`.
/// - Resumable: with a state file, receipts compared by an earlier run (keyed by the evidence
///   SHA-256) are skipped, and their outcomes still count in the summary.
/// - Cancelling the running task stops new launches; the summary says `interrupted`.
public struct BatchComparer: Sendable {
    public struct Options: Sendable {
        public var concurrency: Int = 4
        /// Append-only record of compared receipts; nil: nothing is skipped or remembered.
        public var stateFile: URL?
        public var maxRateLimitAttempts: Int = 6
        /// First pause after a 429 (seconds), doubled per further attempt of the same receipt, at most 60 s.
        public var rateLimitBackoffSeconds: Double = 1
        public init() {}
    }

    /// Made by `GatewayParts.batchComparer`: the app, the gateway's router and the two generations'
    /// adapters the app's receipt routing compares.
    let app: AppPolicy
    let router: MigrationRouter
    let legacy: any VerificationAdapter
    let serverAPI: any VerificationAdapter
    public let options: Options
    let now: @Sendable () -> Int64

    private enum Attempt: Sendable {
        case compared(PurchaseComparison)
        case rateLimited
    }

    private struct Job: Sendable {
        var receipt: BatchReceipt
        var digest: String
        var attempt: Int
        var evidence: PurchaseEvidence { .appReceipt(base64: receipt.receipt, nonce: nil) }
    }

    /// Compares every receipt not compared before; `progress` is called after each one (and once
    /// at the start and, with `final` true, at the end). Throws only when the ledger or the state
    /// file cannot be written: every per-receipt failure is a stored comparison.
    public func run(_ receipts: [BatchReceipt],
                    progress: @escaping @Sendable (BatchProgress, _ final: Bool) -> Void = { _, _ in })
        async throws(VerificationError) -> BatchSummary {
        let started = ContinuousClock.now
        let state = try options.stateFile.map { url throws(VerificationError) in try BatchStateFile(url: url) }
        let previous = try state?.records() ?? [:]
        var summary = BatchSummary(bundleId: app.bundleId)
        var queue: [Job] = []
        var seen: Set<String> = []
        for receipt in receipts {
            let digest = receipt.evidenceSHA256
            guard seen.insert(digest).inserted else { summary.duplicates += 1; continue }
            if let record = previous[digest] {
                summary.add(record, resumed: true)
            } else {
                queue.append(Job(receipt: receipt, digest: digest, attempt: 0))
            }
        }
        summary.total = seen.count
        var current = summary.progress
        progress(current, false)

        var storageError: VerificationError?
        var pauseUntil = ContinuousClock.now
        await withTaskGroup(of: (Job, Attempt).self) { group in
            var next = 0
            var inFlight = 0
            while true {
                while inFlight < options.concurrency, next < queue.count, !Task.isCancelled, storageError == nil {
                    let job = queue[next]
                    next += 1
                    inFlight += 1
                    let delay = pauseUntil - ContinuousClock.now
                    group.addTask {
                        if delay > .zero { try? await Task.sleep(for: delay) }
                        return (job, await compare(job))
                    }
                }
                guard let (job, attempt) = await group.next() else { break }
                inFlight -= 1
                switch attempt {
                case .rateLimited where job.attempt + 1 < options.maxRateLimitAttempts:
                    let pause = ExponentialBackoff(base: .seconds(options.rateLimitBackoffSeconds),
                                                   cap: .seconds(60)).delay(beforeRetry: job.attempt + 1)
                    pauseUntil = max(pauseUntil, ContinuousClock.now + pause)
                    queue.append(Job(receipt: job.receipt, digest: job.digest, attempt: job.attempt + 1))
                    summary.rateLimitedRetries += 1
                case .rateLimited:
                    // Out of patience: the receipt is recorded as failed, so the report shows it.
                    let limited = VerificationError(.rateLimited, "rate limited")
                    let failed = router.compare(
                        legacy: (legacy, .failure(limited)), serverAPI: (serverAPI, .failure(limited)), app: app,
                        evidence: job.evidence, digest: job.digest, account: job.receipt.account ?? "",
                        id: Self.comparisonId(bundleId: app.bundleId, digest: job.digest), now: now())
                    if storageError == nil { storageError = await record(failed, state: state, into: &summary) }
                case .compared(let comparison):
                    // After an interruption a failure may only be the cancellation itself: not a finding.
                    if Task.isCancelled, !comparison.agreed, comparison.legacyError != nil || comparison.serverAPIError != nil {
                        break
                    }
                    if storageError == nil { storageError = await record(comparison, state: state, into: &summary) }
                }
                if storageError != nil { group.cancelAll() }
                summary.elapsedSeconds = (ContinuousClock.now - started).timeInterval
                current = summary.progress
                progress(current, false)
            }
            summary.interrupted = next < queue.count || Task.isCancelled
        }
        if let storageError { throw storageError }
        summary.elapsedSeconds = (ContinuousClock.now - started).timeInterval
        progress(summary.progress, true)
        return summary
    }

    private func record(_ comparison: PurchaseComparison, state: BatchStateFile?,
                        into summary: inout BatchSummary) async -> VerificationError? {
        do throws(VerificationError) {
            try await router.store.recordComparison(comparison)
            let record = BatchRecord(comparison)
            try state?.append(record)
            summary.add(record, resumed: false)
            return nil
        } catch {
            return error
        }
    }

    private func compare(_ job: Job) async -> Attempt {
        let account = job.receipt.account ?? ""
        async let l = MigrationRouter.attempt(legacy, job.evidence, account, app)
        async let s = MigrationRouter.attempt(serverAPI, job.evidence, account, app)
        let (legacyResult, serverResult) = await (l, s)
        for result in [legacyResult, serverResult] {
            if case .failure(let e) = result, e.code == .rateLimited { return .rateLimited }
        }
        return .compared(router.compare(legacy: (legacy, legacyResult), serverAPI: (serverAPI, serverResult), app: app,
                                        evidence: job.evidence,
                                        digest: job.digest, account: account,
                                        id: Self.comparisonId(bundleId: app.bundleId, digest: job.digest), now: now()))
    }

    /// Derived from the app and the evidence, so comparing a receipt again replaces its comparison.
    static func comparisonId(bundleId: String, digest: String) -> String {
        "batch-" + SHA256Digest.lowercaseHex("\(bundleId)\n\(digest)").prefix(32)
    }
}
