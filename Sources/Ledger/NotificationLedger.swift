import Foundation
import IAPCore

/// The durable side of App Store Server Notifications: an inbox written before the route answers,
/// a worker that applies each entry exactly once, the per-chain subscription state, and the outbox
/// of webhook events for the app backend.
///
/// Guarantees every implementation gives (SQLite now, PostgreSQL with `FOR UPDATE SKIP LOCKED` later):
/// - `enqueue` returns only once the entry is committed; (bundleId, id) is unique, a redelivery is a no-op.
/// - `processPending` applies each entry atomically (its own savepoint; entries share a commit in
///   batches): the state, the owner's entitlement, the webhook events, the unknown-type mark and
///   `processed` are committed together or not at all,
///   so a crash at any point neither loses nor repeats an effect. Several workers may drain one inbox.
/// - an entry that fails is retried with backoff and parked after `InboxRetryPolicy.maxAttempts`;
///   it never holds back the entries after it.
/// - the outbox holds each (bundleId, idempotencyKey) once; delivery is at-least-once.
///
/// Entitlements are written by two paths: a claim (the verify route, facts read from Apple at the
/// claim's `now`) and this one (facts as of the notification's `signedDate`). Each row's `updated_at`
/// is the time of the fact it holds, and a notification never overwrites a row holding a newer fact:
/// a notification signed before a claim but processed after it would otherwise roll the claim back.
/// A claim always writes (what Apple says at `now` is the newest fact there is). A notification for
/// a chain not yet claimed updates only `subscription_states`; the claim path can read it with
/// `subscriptionState(bundleId:originalTransactionId:)`.
public protocol NotificationLedger: Sendable {
    // MARK: Inbox

    /// Stores a verified notification durably. False if (bundleId, id) was already stored: nothing changes.
    func enqueue(_ entry: InboxEntry) async throws(VerificationError) -> Bool

    /// Applies up to `limit` due entries, oldest `signedDate` first (then `receivedAt`), each
    /// atomically (an entry whose chain another instance is applying right now waits for a later call). `apply` gets the entry and its chain's stored state (nil for a new chain or
    /// an entry naming none) and must be pure: it runs inside the transaction and must not call the
    /// ledger. A throw from `apply`, or an outcome the ledger refuses, fails that entry only.
    /// Throws only when the storage itself fails.
    func processPending(limit: Int, now: Int64,
                        _ apply: @escaping @Sendable (InboxEntry, SubscriptionState?) throws(VerificationError) -> LifecycleOutcome)
        async throws(VerificationError) -> ProcessReport

    func subscriptionState(bundleId: String, originalTransactionId: String) async throws(VerificationError) -> SubscriptionState?

    func inboxDepth() async throws(VerificationError) -> InboxDepth

    /// Entries of one app with `signedDate >= since`, oldest first, processed or not (audit, replay).
    func inboxEntries(bundleId: String, since: Int64, limit: Int) async throws(VerificationError) -> [InboxEntry]

    /// Makes entries of one app with `signedDate >= since` pending again (parked ones too, with their
    /// attempts reset); the next `processPending` applies them through the same machine, which
    /// ignores what is older than the state. Returns how many entries were reset.
    @discardableResult
    func markForReplay(bundleId: String, since: Int64) async throws(VerificationError) -> Int

    /// Entries that failed `maxAttempts` times and wait for an operator (or a replay), oldest first.
    func parkedEntries(limit: Int) async throws(VerificationError) -> [ParkedInboxEntry]

    /// Drops the raw bodies of entries received before `olderThan`; the rows (and their parsed
    /// events) stay. Returns how many bodies were dropped.
    @discardableResult
    func purgeRawBodies(olderThan: Int64) async throws(VerificationError) -> Int

    /// How many distinct notifications of a type the lifecycle did not know were processed.
    func unknownNotificationCounts() async throws(VerificationError) -> [UnknownNotificationCount]

    // MARK: Webhook outbox

    /// Adds events due at `now`; an event whose (bundleId, idempotencyKey) is already queued or
    /// delivered is skipped. Returns how many were added. (`processPending` does this itself.)
    @discardableResult
    func enqueueWebhooks(_ events: [WebhookEvent], now: Int64) async throws(VerificationError) -> Int

    /// Moves up to `limit` stored entitlements whose period ended before `now` (as `EntitlementAccess`
    /// judges it: active past its expiry, grace past its end) to the state the clock gives them, each
    /// atomically with its `entitlementChanged` event (`EntitlementAccess.periodEnded`: one key per
    /// chain and transition, so repeated or concurrent sweeps queue it once). Returns how many moved.
    @discardableResult
    func advanceEntitlementsByClock(now: Int64, limit: Int) async throws(VerificationError) -> Int

    /// Undelivered events with `nextAttemptAt <= now`, earliest due first (a read: operations, tests).
    func dueWebhooks(now: Int64, limit: Int) async throws(VerificationError) -> [OutboxEntry]

    /// Takes up to `limit` due events for delivery by `holder`, earliest first, each with its chain's
    /// owner: they are not due again for anyone (another instance included) until `now + leaseMillis`,
    /// unless renewed, marked or released sooner. An event is taken only together with every earlier
    /// undelivered event of its purchase chain (all due, ahead of it in the answer): one leased
    /// elsewhere or waiting for its retry holds the chain's later events back, so a chain's events
    /// are delivered in order and never two at once, across instances too. A deliverer that dies mid-way leaves them to be retried once the lease runs
    /// out (or at once, when it restarts: `releaseWebhookLeases`), so delivery stays at-least-once
    /// without two instances sending the same event at the same time.
    func leaseDueWebhooks(now: Int64, limit: Int, leaseMillis: Int64, holder: String) async throws(VerificationError) -> [OutboxEntry]

    /// Extends to `until` the leases `holder` still has among `seqs` (undelivered, not marked failed,
    /// not taken by another holder since); returns those seqs. A seq missing from the answer is no
    /// longer the caller's to send.
    func renewWebhookLeases(_ seqs: [Int64], holder: String, until: Int64) async throws(VerificationError) -> Set<Int64>

    /// Makes every undelivered event leased by `holder` due at `now`. For an instance starting under
    /// a stable identity: what that identity holds was taken by its previous incarnation, which no
    /// longer sends it. Returns how many events were released.
    @discardableResult
    func releaseWebhookLeases(holder: String, now: Int64) async throws(VerificationError) -> Int

    func markDelivered(_ seq: Int64, at now: Int64) async throws(VerificationError)

    /// Records what became of a batch's events, in one commit: delivered; failed, due again at its
    /// `nextAttemptAt` (an attempt counted); released, due again now (not attempted: an earlier event
    /// of its chain failed). A failure or release changes only an event still leased by `holder`.
    func markWebhooks(_ marks: [WebhookMark], holder: String, at now: Int64) async throws(VerificationError)

    /// Counts a failed attempt and ends the event's lease; the caller computes the backoff.
    func markFailed(_ seq: Int64, nextAttemptAt: Int64) async throws(VerificationError)

    /// Events not yet delivered.
    func outboxDepth() async throws(VerificationError) -> Int

    // MARK: Consumption requests (Apple waits 12 hours for the answer)

    /// Unanswered requests made at or after `notBefore` (pass `now - 12h`), oldest first.
    func pendingConsumptionRequests(notBefore: Int64, limit: Int) async throws(VerificationError) -> [ConsumptionRequest]

    /// False if the request is unknown or was already answered.
    @discardableResult
    func markConsumptionAnswered(bundleId: String, transactionId: String, at now: Int64) async throws(VerificationError) -> Bool
}

/// One notification as received and verified, before processing.
public struct InboxEntry: Hashable, Sendable {
    /// `notificationUUID` (V2) or a digest of the body (V1).
    public var id: String
    public var bundleId: String
    /// "2" or "1".
    public var version: String
    public var notificationType: String
    public var subtype: String?
    /// Milliseconds since 1970.
    public var signedDate: Int64
    public var environment: String
    public var receivedAt: Int64
    /// The body exactly as received; empty once purged by retention.
    public var rawBody: Data
    /// nil for types that name no purchase chain (TEST, EXTERNAL_PURCHASE_TOKEN, ...).
    public var event: LifecycleEvent?

    public init(id: String, bundleId: String, version: String, notificationType: String, subtype: String?,
                signedDate: Int64, environment: String, receivedAt: Int64, rawBody: Data, event: LifecycleEvent?) {
        self.id = id
        self.bundleId = bundleId
        self.version = version
        self.notificationType = notificationType
        self.subtype = subtype
        self.signedDate = signedDate
        self.environment = environment
        self.receivedAt = receivedAt
        self.rawBody = rawBody
        self.event = event
    }
}

public struct ProcessReport: Hashable, Sendable {
    /// Entries applied and marked processed (unknown types included).
    public var processed = 0
    /// Entries whose attempt failed this run (parked ones included).
    public var failed = 0
    /// Processed entries of a type the lifecycle did not know.
    public var unknown = 0
    /// Entries that reached `maxAttempts` in this run.
    public var parked = 0

    /// Counts `other`'s entries too (several drains summed into one report).
    public mutating func add(_ other: ProcessReport) {
        processed += other.processed
        failed += other.failed
        unknown += other.unknown
        parked += other.parked
    }
}

public struct InboxDepth: Hashable, Sendable {
    /// Not processed and not parked (those waiting for a retry included).
    public var pending: Int
    /// Pending entries that have failed at least once.
    public var retrying: Int
    public var parked: Int
}

public struct ParkedInboxEntry: Hashable, Sendable {
    public var bundleId: String
    public var id: String
    public var notificationType: String
    public var attempts: Int
    /// The `VerificationError.Code` of the last failure (never its message).
    public var lastErrorCode: String?
}

/// How a failing inbox entry is retried: after attempt n it waits `baseDelay * 2^(n-1)` (capped).
public struct InboxRetryPolicy: Hashable, Sendable {
    public var maxAttempts: Int
    public var baseDelayMillis: Int64
    public var maxDelayMillis: Int64

    public static let standard = InboxRetryPolicy(maxAttempts: 5, baseDelayMillis: 1_000, maxDelayMillis: 3_600_000)

    /// The wait after the `attempts`-th failure.
    public func delay(afterAttempts attempts: Int) -> Int64 {
        ExponentialBackoff(base: .milliseconds(baseDelayMillis), cap: .milliseconds(maxDelayMillis))
            .delay(beforeRetry: attempts).wholeMilliseconds
    }
}

public struct UnknownNotificationCount: Hashable, Sendable {
    public var bundleId: String
    public var notificationType: String
    public var subtype: String?
    public var count: Int
}

public struct OutboxEntry: Hashable, Sendable {
    public var seq: Int64
    public var event: WebhookEvent
    public var attempts: Int
    public var nextAttemptAt: Int64
    /// The account that owns the event's chain, as the lease read it (nil: none, or not read).
    public var owner: String? = nil
}

/// What became of one leased webhook event (`markWebhooks`).
public enum WebhookMark: Hashable, Sendable {
    case delivered(Int64)
    case failed(Int64, nextAttemptAt: Int64)
    case released(Int64)
}

public struct ConsumptionRequest: Hashable, Sendable {
    public var bundleId: String
    public var transactionId: String
    public var originalTransactionId: String?
    public var requestedAt: Int64
}
