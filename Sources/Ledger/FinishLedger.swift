import Foundation
import IAPCore

/// The finish outbox: purchases the gateway granted and must tell the App Store it delivered
/// (Finish Transaction, for apps whose policy has `finishTransactions`). A claim writes its rows in
/// its own transaction (`PurchaseClaim.finishIfNewlyGranted`), so a row exists only for a durable
/// grant; the finisher leases what is due, sends it, and records the outcome. Guarantees:
/// - at most one row per transaction of an app, however often it is claimed;
/// - a row marked finished is never leased again (never sent twice after Apple's success);
/// - a row whose chain is refunded or revoked when it comes due is dropped, never handed out.
public protocol FinishLedger: Sendable {
    /// Takes up to `limit` due rows for `holder` until `now + leaseMillis` (not due again meanwhile,
    /// for any instance, unless renewed, marked or released sooner) and drops, instead of returning,
    /// those whose chain is refunded or revoked by now.
    func leaseDueFinishes(now: Int64, limit: Int, leaseMillis: Int64, holder: String)
        async throws(VerificationError) -> [PendingFinish]

    /// Extends to `until` the leases `holder` still has among `keys` (not marked since, not taken by
    /// another holder); returns those keys. A key missing from the answer is no longer the caller's.
    func renewFinishLeases(_ keys: [FinishKey], holder: String, until: Int64) async throws(VerificationError) -> Set<FinishKey>

    /// Makes every pending row leased by `holder` due at `now`: for an instance starting under a
    /// stable identity, whose previous incarnation held them and no longer sends them. Returns how many.
    @discardableResult
    func releaseFinishLeases(holder: String, now: Int64) async throws(VerificationError) -> Int

    /// Records Apple's success; false if the row was already finished or dropped.
    @discardableResult
    func markFinished(bundleId: String, transactionId: String, at now: Int64) async throws(VerificationError) -> Bool

    /// Records a failed attempt: due again at `nextAttemptAt`, or dropped for good when `final`.
    func markFinishFailed(bundleId: String, transactionId: String, code: String, nextAttemptAt: Int64, final: Bool,
                          at now: Int64) async throws(VerificationError)

    /// Every row of one app, oldest first (operators and tests).
    func finishEntries(bundleId: String) async throws(VerificationError) -> [FinishEntry]

    /// Rows still to send, and rows that failed for good (Apple's final refusal; not those dropped
    /// because their chain was refunded or revoked, which is the outcome wanted): for `/metrics`.
    func finishOutboxDepth() async throws(VerificationError) -> FinishOutboxDepth
}

/// A row handed to the finisher: which transaction, where Apple keeps it, how often it was tried.
public struct PendingFinish: Hashable, Sendable {
    public var bundleId: String
    public var transactionId: String
    public var environment: AppStoreEnvironment
    public var attempts: Int

    public var key: FinishKey { FinishKey(bundleId: bundleId, transactionId: transactionId) }
}

/// A finish outbox row's identity: one transaction of one app.
public struct FinishKey: Hashable, Sendable {
    public var bundleId: String
    public var transactionId: String
}

/// One row of the finish outbox as stored.
public struct FinishEntry: Hashable, Sendable {
    public var transactionId: String
    public var environment: AppStoreEnvironment
    public var attempts: Int
    public var nextAttemptAt: Int64
    public var finishedAt: Int64?
    public var droppedAt: Int64?
    public var lastErrorCode: String?
}

public struct FinishOutboxDepth: Sendable, Equatable {
    public var pending: Int
    public var failed: Int

    /// The code of a row dropped because its app's policy stopped finishing (`TransactionFinisher`):
    /// a decision, not a failure, so not counted in `failed`.
    public static let finishingTurnedOff = "FINISH_TRANSACTIONS_OFF"
}
