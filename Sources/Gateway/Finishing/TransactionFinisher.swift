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
    let serverAPI: ServerAPIAdapter?
    /// How long a leased row stays this instance's: longer than one call can take (its upstream
    /// budget), so no other instance sends it while this one still may.
    let leaseMillis: Int64
    let logger: Logger
    let now: @Sendable () -> Int64

    public init(apps: [String: AppPolicy], ledger: any FinishLedger, serverAPI: ServerAPIAdapter?,
                upstreamBudget: Duration, logger: Logger = .disabled, now: @escaping @Sendable () -> Int64) {
        self.apps = apps
        self.ledger = ledger
        self.serverAPI = serverAPI
        leaseMillis = Int64(upstreamBudget / .milliseconds(1)) + 30_000
        self.logger = logger
        self.now = now
    }

    /// What Apple answers for good: the transaction is unknown to it, or the id is not one.
    static func isFinal(_ code: VerificationError.Code) -> Bool {
        code == .transactionNotFound || code == .malformedRequest
    }

    /// When a failed row is due again: the backoff after its attempts, or Apple's Retry-After if
    /// that is later (never sooner than Apple asked).
    static func nextAttempt(after error: VerificationError, attempts: Int, now: Int64) -> Int64 {
        let backoff = WebhookDispatcher.backoffMs(afterAttempts: attempts)
        return now + max(backoff, Int64(error.retryAfterSeconds ?? 0) * 1000)
    }

    /// One batch of due rows; returns how many Apple accepted.
    @discardableResult
    public func finishDue() async throws(VerificationError) -> Int {
        let due = try await ledger.leaseDueFinishes(now: now(), limit: Self.batchSize, leaseMillis: leaseMillis)
        var finished = 0
        for row in due {
            guard let app = apps[row.bundleId], app.finishTransactions, let serverAPI else {
                // The policy no longer finishes (the app's StoreKit finish() does): leave it to the app.
                try await ledger.markFinishFailed(bundleId: row.bundleId, transactionId: row.transactionId,
                                                  code: "FINISH_TRANSACTIONS_OFF", nextAttemptAt: now(), final: true, at: now())
                continue
            }
            do throws(VerificationError) {
                try await serverAPI.client(for: app)
                    .finishTransaction(transactionId: row.transactionId,
                                       environment: row.environment == .sandbox ? .sandbox : .production)
                if try await ledger.markFinished(bundleId: row.bundleId, transactionId: row.transactionId, at: now()) {
                    finished += 1
                }
            } catch {
                let final = Self.isFinal(error.code)
                logger.warning("finish_transaction_failed", ["bundleId": row.bundleId, "code": error.code.rawValue,
                                                             "final": String(final)])
                try await ledger.markFinishFailed(bundleId: row.bundleId, transactionId: row.transactionId,
                                                  code: error.code.rawValue,
                                                  nextAttemptAt: Self.nextAttempt(after: error, attempts: row.attempts,
                                                                                  now: now()),
                                                  final: final, at: now())
            }
        }
        return finished
    }

    /// Until cancelled: works off what is due, then looks again every `interval`.
    public func run(interval: Duration = .seconds(1)) async {
        await repeatUntilCancelled(every: interval, logger: logger,
                                   failure: "finish_outbox_failed") { () throws(VerificationError) in
            while try await finishDue() > 0 {}
        }
    }
}
