import Adapters
import Foundation
import IAPConfig
import IAPCore
import Ledger

/// Drains the finish outbox: tells the App Store through Finish Transaction (API 1.20) that the
/// gateway delivered each purchase it newly granted, for apps whose policy has `finishTransactions`.
/// Rows exist only for durable grants (the claim writes them); each is sent at least once (a crash
/// between Apple's answer and `markFinished` sends it again), never again once marked finished, and
/// never once its chain is refunded or revoked (the ledger drops it when it comes due). A failure is
/// tried again after the backoff, or after Apple's `Retry-After` when that is longer.
public final class TransactionFinisher: Sendable {
    /// Rows per ledger call.
    static let batchSize = 50

    let apps: [String: AppPolicy]
    let ledger: any FinishLedger
    /// The adapter that can tell Apple (found by capability); nil: no row can be sent.
    let finishing: (any TransactionFinishing)?
    let identity: WorkerIdentity
    /// How long a leased row stays this instance's without renewal; renewed every third of it while
    /// its batch is worked on. A crashed instance's rows are due again at most this long after (for
    /// another instance), or at once for its own next incarnation (`reclaimEarlierLeases`).
    let leaseMillis: Int64
    let logger: Logger
    let now: @Sendable () -> Int64
    /// The wait between renewals: real time, unless a test drives `now` and the waits with it.
    let wait: @Sendable (Duration) async throws -> Void

    public init(apps: [String: AppPolicy], ledger: any FinishLedger, finishing: (any TransactionFinishing)?,
                identity: WorkerIdentity = .ephemeral(), leaseMillis: Int64 = 10_000, logger: Logger = .disabled,
                now: @escaping @Sendable () -> Int64,
                wait: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }) {
        self.apps = apps
        self.ledger = ledger
        self.finishing = finishing
        self.identity = identity
        self.leaseMillis = max(leaseMillis, 3)
        self.logger = logger
        self.now = now
        self.wait = wait
    }

    /// What Apple answers for good: the transaction is unknown to it, or the id is not one.
    static func isFinal(_ code: VerificationError.Code) -> Bool {
        code == .transactionNotFound || code == .malformedRequest
    }

    /// One batch of due rows; returns how many Apple accepted.
    @discardableResult
    public func finishDue() async throws(VerificationError) -> Int {
        let due = try await ledger.leaseDueFinishes(now: now(), limit: Self.batchSize, leaseMillis: leaseMillis,
                                                    holder: identity.id)
        guard !due.isEmpty else { return 0 }
        let lease = LeasedBatch(due.map(\.key), until: now() + leaseMillis)
        let renewal = Task { [ledger, holder = identity.id] in
            await lease.keepRenewing(leaseMillis: leaseMillis, now: now, wait: wait, logger: logger,
                                     failure: "finish_lease_renewal_failed") { (keys, until) throws(VerificationError) in
                try await ledger.renewFinishLeases(keys, holder: holder, until: until)
            }
        }
        defer { renewal.cancel() }
        var finished = 0
        for row in due {
            guard let app = apps[row.bundleId], app.finishTransactions, let finishing else {
                // The policy no longer finishes (the app's StoreKit finish() does): leave it to the app.
                try await ledger.markFinishFailed(bundleId: row.bundleId, transactionId: row.transactionId,
                                                  code: FinishOutboxDepth.finishingTurnedOff, nextAttemptAt: now(), final: true, at: now())
                continue
            }
            // Once the lease may have run out (a renewal lost, or stalled on storage), another instance
            // may be sending the rest of the batch: this one stops. A call already under way when that
            // happens may reach Apple twice, which Finish Transaction takes as once.
            guard lease.holds(row.key, now: now(), margin: leaseMillis / 5) else {
                logger.warning("finish_lease_ran_out", ["bundleId": row.bundleId])
                break
            }
            do throws(VerificationError) {
                try await finishing.finishTransaction(row.transactionId, environment: row.environment, app: app)
                if try await ledger.markFinished(bundleId: row.bundleId, transactionId: row.transactionId, at: now()) {
                    finished += 1
                }
            } catch {
                let final = Self.isFinal(error.code)
                logger.warning("finish_transaction_failed", ["bundleId": row.bundleId, "code": error.code.rawValue,
                                                             "final": String(final)])
                try await ledger.markFinishFailed(bundleId: row.bundleId, transactionId: row.transactionId,
                                                  code: error.code.rawValue,
                                                  nextAttemptAt: JobBackoff.nextAttempt(
                                                      afterAttempts: row.attempts, retryAfterSeconds: error.retryAfterSeconds,
                                                      now: now()),
                                                  final: final, at: now())
            }
        }
        return finished
    }

    /// At start, under a stable identity: the rows its previous incarnation held are due now.
    public func reclaimEarlierLeases() async {
        await identity.reclaimEarlierLeases(of: "finish", logger: logger) { (holder) throws(VerificationError) in
            try await ledger.releaseFinishLeases(holder: holder, now: now())
        }
    }

    /// Until cancelled: works off what is due, then looks again every `interval`.
    public func run(interval: Duration = .seconds(1)) async {
        await reclaimEarlierLeases()
        await repeatUntilCancelled(every: interval, logger: logger,
                                   failure: "finish_outbox_failed") { () throws(VerificationError) in
            while try await finishDue() > 0 {}
        }
    }
}
