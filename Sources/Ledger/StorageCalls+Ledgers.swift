import Foundation
import IAPCore

// Which path each call of the ledger's protocols takes (`StorageCall`): claims, issued nonces, stored
// answers and inbox inserts are batched (the hot writes of concurrent requests); every other call
// that changes a row is a write; the rest are reads. `ping` is not here: `AsyncSQLLedger` answers it
// within the readiness deadline.

extension Ledger where Self: StorageCalls {
    public func issueNonce(bundleId: String, account: String, ttlSeconds: Int, now: Int64,
                           keyed: (IdempotentWrite, @Sendable (IssuedNonce) -> String)?)
        async throws(VerificationError) -> IssuedNonce {
        try await batched { (l, slot) throws(VerificationError) in
            try l.issueNonce(bundleId: bundleId, account: account, ttlSeconds: ttlSeconds, now: now, keyed: keyed, on: slot.connection)
        }
    }

    public func consumeNonce(_ value: String, bundleId: String, account: String, now: Int64, by request: String?)
        async throws(VerificationError) {
        try await write { (l) throws(VerificationError) in
            try l.consumeNonce(value, bundleId: bundleId, account: account, now: now, by: request)
        }
    }

    public func idempotentAnswer(bundleId: String, key: String, now: Int64) async throws(VerificationError) -> StoredAnswer? {
        try await read { (l) throws(VerificationError) in try l.idempotentAnswer(bundleId: bundleId, key: key, now: now) }
    }

    public func storeIdempotentAnswer(_ write: IdempotentWrite, bundleId: String, status: Int, body: String, now: Int64)
        async throws(VerificationError) {
        try await batched { (_, slot) throws(VerificationError) in
            try SQLLedger.storeAnswer(write, bundleId: bundleId, status: status, body: body, now: now, slot.connection)
        }
    }

    public func purgeIdempotentAnswers(expiredBy now: Int64) async throws(VerificationError) -> Int {
        try await write { (l) throws(VerificationError) in try l.purgeIdempotentAnswers(expiredBy: now) }
    }

    public func claim(_ claim: PurchaseClaim) async throws(VerificationError) -> ClaimOutcome {
        try await batched(locks: SQLLedger.chainLocks(of: claim)) { (l, slot) throws(VerificationError) in
            try l.claim(claim, on: slot.connection)
        }
    }

    public func entitlements(bundleId: String, account: String) async throws(VerificationError) -> [Entitlement] {
        try await read { (l) throws(VerificationError) in try l.entitlements(bundleId: bundleId, account: account) }
    }

    public func owner(bundleId: String, originalTransactionId: String) async throws(VerificationError) -> String? {
        try await read { (l) throws(VerificationError) in try l.owner(bundleId: bundleId, originalTransactionId: originalTransactionId) }
    }

    public func transactions(bundleId: String, originalTransactionId: String)
        async throws(VerificationError) -> [CanonicalTransaction] {
        try await read { (l) throws(VerificationError) in
            try l.transactions(bundleId: bundleId, originalTransactionId: originalTransactionId)
        }
    }

    public func recordAudit(_ record: AuditRecord) async throws(VerificationError) {
        try await write { (l) throws(VerificationError) in try l.recordAudit(record) }
    }

    public func auditRecords(bundleId: String, limit: Int) async throws(VerificationError) -> [AuditRecord] {
        try await read { (l) throws(VerificationError) in try l.auditRecords(bundleId: bundleId, limit: limit) }
    }

    public func supportHistory(bundleId: String, subject: SupportSubject, since: Int64, limit: Int)
        async throws(VerificationError) -> SupportHistory {
        try await read { (l) throws(VerificationError) in
            try l.supportHistory(bundleId: bundleId, subject: subject, since: since, limit: limit)
        }
    }

    public func purgeAudit(olderThan cutoff: Int64) async throws(VerificationError) -> Int {
        try await write { (l) throws(VerificationError) in try l.purgeAudit(olderThan: cutoff) }
    }

    public func storeLatestReceipt(bundleId: String, originalTransactionId: String, sealedReceipt: Data)
        async throws(VerificationError) {
        try await write { (l) throws(VerificationError) in
            try l.storeLatestReceipt(bundleId: bundleId, originalTransactionId: originalTransactionId, sealedReceipt: sealedReceipt)
        }
    }

    public func latestReceipt(bundleId: String, originalTransactionId: String) async throws(VerificationError) -> Data? {
        try await read { (l) throws(VerificationError) in
            try l.latestReceipt(bundleId: bundleId, originalTransactionId: originalTransactionId)
        }
    }
}

extension NotificationLedger where Self: StorageCalls {
    public func enqueue(_ entry: InboxEntry) async throws(VerificationError) -> Bool {
        let row = try SQLLedger.inboxRow(entry)
        return try await batched { (_, slot) throws(VerificationError) in try SQLLedger.insert(row, slot.connection) }
    }

    public func processPending(limit: Int, now: Int64,
                               _ apply: @escaping @Sendable (InboxEntry, SubscriptionState?) throws(VerificationError) -> LifecycleOutcome)
        async throws(VerificationError) -> ProcessReport {
        try await write { (l) throws(VerificationError) in try l.processPending(limit: limit, now: now, apply) }
    }

    public func subscriptionState(bundleId: String, originalTransactionId: String)
        async throws(VerificationError) -> SubscriptionState? {
        try await read { (l) throws(VerificationError) in
            try l.subscriptionState(bundleId: bundleId, originalTransactionId: originalTransactionId)
        }
    }

    public func inboxDepth() async throws(VerificationError) -> InboxDepth {
        try await read { (l) throws(VerificationError) in try l.inboxDepth() }
    }

    public func inboxEntries(bundleId: String, since: Int64, limit: Int) async throws(VerificationError) -> [InboxEntry] {
        try await read { (l) throws(VerificationError) in try l.inboxEntries(bundleId: bundleId, since: since, limit: limit) }
    }

    @discardableResult
    public func markForReplay(bundleId: String, since: Int64) async throws(VerificationError) -> Int {
        try await write { (l) throws(VerificationError) in try l.markForReplay(bundleId: bundleId, since: since) }
    }

    public func parkedEntries(limit: Int) async throws(VerificationError) -> [ParkedInboxEntry] {
        try await read { (l) throws(VerificationError) in try l.parkedEntries(limit: limit) }
    }

    @discardableResult
    public func purgeRawBodies(olderThan: Int64) async throws(VerificationError) -> Int {
        try await write { (l) throws(VerificationError) in try l.purgeRawBodies(olderThan: olderThan) }
    }

    public func unknownNotificationCounts() async throws(VerificationError) -> [UnknownNotificationCount] {
        try await read { (l) throws(VerificationError) in try l.unknownNotificationCounts() }
    }

    @discardableResult
    public func enqueueWebhooks(_ events: [WebhookEvent], now: Int64) async throws(VerificationError) -> Int {
        try await write { (l) throws(VerificationError) in try l.enqueueWebhooks(events, now: now) }
    }

    @discardableResult
    public func advanceEntitlementsByClock(now: Int64, limit: Int) async throws(VerificationError) -> Int {
        try await write { (l) throws(VerificationError) in try l.advanceEntitlementsByClock(now: now, limit: limit) }
    }

    public func dueWebhooks(now: Int64, limit: Int) async throws(VerificationError) -> [OutboxEntry] {
        try await read { (l) throws(VerificationError) in try l.dueWebhooks(now: now, limit: limit) }
    }

    public func leaseDueWebhooks(now: Int64, limit: Int, leaseMillis: Int64, holder: String)
        async throws(VerificationError) -> [OutboxEntry] {
        try await write { (l) throws(VerificationError) in
            try l.leaseDueWebhooks(now: now, limit: limit, leaseMillis: leaseMillis, holder: holder)
        }
    }

    public func renewWebhookLeases(_ seqs: [Int64], holder: String, until: Int64) async throws(VerificationError) -> Set<Int64> {
        try await write { (l) throws(VerificationError) in try l.renewWebhookLeases(seqs, holder: holder, until: until) }
    }

    @discardableResult
    public func releaseWebhookLeases(holder: String, now: Int64) async throws(VerificationError) -> Int {
        try await write { (l) throws(VerificationError) in try l.releaseWebhookLeases(holder: holder, now: now) }
    }

    public func markDelivered(_ seq: Int64, at now: Int64) async throws(VerificationError) {
        try await write { (l) throws(VerificationError) in try l.markDelivered(seq, at: now) }
    }

    public func markWebhooks(_ marks: [WebhookMark], holder: String, at now: Int64) async throws(VerificationError) {
        try await write { (l) throws(VerificationError) in try l.markWebhooks(marks, holder: holder, at: now) }
    }

    public func markFailed(_ seq: Int64, nextAttemptAt: Int64) async throws(VerificationError) {
        try await write { (l) throws(VerificationError) in try l.markFailed(seq, nextAttemptAt: nextAttemptAt) }
    }

    public func outboxDepth() async throws(VerificationError) -> Int {
        try await read { (l) throws(VerificationError) in try l.outboxDepth() }
    }

    public func pendingConsumptionRequests(notBefore: Int64, limit: Int) async throws(VerificationError) -> [ConsumptionRequest] {
        try await read { (l) throws(VerificationError) in try l.pendingConsumptionRequests(notBefore: notBefore, limit: limit) }
    }

    @discardableResult
    public func markConsumptionAnswered(bundleId: String, transactionId: String, at now: Int64)
        async throws(VerificationError) -> Bool {
        try await write { (l) throws(VerificationError) in
            try l.markConsumptionAnswered(bundleId: bundleId, transactionId: transactionId, at: now)
        }
    }
}

extension RolloutLedger where Self: StorageCalls {
    public func rolloutState(bundleId: String) async throws(VerificationError) -> RolloutState? {
        try await read { (l) throws(VerificationError) in try l.rolloutState(bundleId: bundleId) }
    }

    public func changeRollout(expected: RolloutState?, next: RolloutState, event: RolloutEvent, webhooks: [WebhookEvent])
        async throws(VerificationError) -> Bool {
        try await write { (l) throws(VerificationError) in
            try l.changeRollout(expected: expected, next: next, event: event, webhooks: webhooks)
        }
    }

    public func rolloutEvents(bundleId: String, limit: Int) async throws(VerificationError) -> [RolloutEvent] {
        try await read { (l) throws(VerificationError) in try l.rolloutEvents(bundleId: bundleId, limit: limit) }
    }

    public func rolloutRollbacks(bundleId: String) async throws(VerificationError) -> Int {
        try await read { (l) throws(VerificationError) in try l.rolloutRollbacks(bundleId: bundleId) }
    }
}

extension ComparisonLedger where Self: StorageCalls {
    public func recordComparison(_ comparison: PurchaseComparison) async throws(VerificationError) {
        try await write { (l) throws(VerificationError) in try l.recordComparison(comparison) }
    }

    public func comparisons(_ query: ComparisonQuery) async throws(VerificationError) -> [PurchaseComparison] {
        try await read { (l) throws(VerificationError) in try l.comparisons(query) }
    }

    public func comparisonCounts(bundleId: String, from: Int64?, to: Int64?) async throws(VerificationError) -> ComparisonCounts {
        try await read { (l) throws(VerificationError) in try l.comparisonCounts(bundleId: bundleId, from: from, to: to) }
    }
}

extension ReconciliationLedger where Self: StorageCalls {
    public func chainsToReconcile(bundleId: String, expiringBefore: Int64, limit: Int) async throws(VerificationError) -> [String] {
        try await read { (l) throws(VerificationError) in
            try l.chainsToReconcile(bundleId: bundleId, expiringBefore: expiringBefore, limit: limit)
        }
    }

    public func chainsWithLatestReceipt(bundleId: String, limit: Int) async throws(VerificationError) -> [String] {
        try await read { (l) throws(VerificationError) in try l.chainsWithLatestReceipt(bundleId: bundleId, limit: limit) }
    }

    public func acquireLease(_ name: String, holder: String, now: Int64, ttlMillis: Int64) async throws(VerificationError) -> Bool {
        try await write { (l) throws(VerificationError) in try l.acquireLease(name, holder: holder, now: now, ttlMillis: ttlMillis) }
    }

    public func releaseLease(_ name: String, holder: String) async throws(VerificationError) {
        try await write { (l) throws(VerificationError) in try l.releaseLease(name, holder: holder) }
    }
}

extension FinishLedger where Self: StorageCalls {
    public func leaseDueFinishes(now: Int64, limit: Int, leaseMillis: Int64, holder: String)
        async throws(VerificationError) -> [PendingFinish] {
        try await write { (l) throws(VerificationError) in
            try l.leaseDueFinishes(now: now, limit: limit, leaseMillis: leaseMillis, holder: holder)
        }
    }

    public func renewFinishLeases(_ keys: [FinishKey], holder: String, until: Int64)
        async throws(VerificationError) -> Set<FinishKey> {
        try await write { (l) throws(VerificationError) in try l.renewFinishLeases(keys, holder: holder, until: until) }
    }

    @discardableResult
    public func releaseFinishLeases(holder: String, now: Int64) async throws(VerificationError) -> Int {
        try await write { (l) throws(VerificationError) in try l.releaseFinishLeases(holder: holder, now: now) }
    }

    @discardableResult
    public func markFinished(bundleId: String, transactionId: String, at now: Int64) async throws(VerificationError) -> Bool {
        try await write { (l) throws(VerificationError) in try l.markFinished(bundleId: bundleId, transactionId: transactionId, at: now) }
    }

    public func markFinishFailed(bundleId: String, transactionId: String, code: String, nextAttemptAt: Int64, final: Bool,
                                 at now: Int64) async throws(VerificationError) {
        try await write { (l) throws(VerificationError) in
            try l.markFinishFailed(bundleId: bundleId, transactionId: transactionId, code: code, nextAttemptAt: nextAttemptAt,
                                   final: final, at: now)
        }
    }

    public func finishEntries(bundleId: String) async throws(VerificationError) -> [FinishEntry] {
        try await read { (l) throws(VerificationError) in try l.finishEntries(bundleId: bundleId) }
    }

    public func finishOutboxDepth() async throws(VerificationError) -> FinishOutboxDepth {
        try await read { (l) throws(VerificationError) in try l.finishOutboxDepth() }
    }
}
