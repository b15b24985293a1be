import Foundation
import IAPCore

extension SQLLedger {
    // MARK: Enqueue

    public func enqueue(_ entry: InboxEntry) throws(VerificationError) -> Bool {
        // The route answers Apple 200 on return, and Apple will not send it again: like every commit of
        // the ledger, this one is on disk before the call returns.
        let row = try Self.inboxRow(entry)
        return try database.transaction { (connection) throws(VerificationError) in try Self.insert(row, connection) }
    }

    /// The row of an entry the inbox takes (checked, its event as text), for `insert`: built before
    /// the write, so neither a batch's open transaction nor its retry after a conflict waits on it.
    static func inboxRow(_ entry: InboxEntry) throws(VerificationError) -> [SQLValue] {
        guard entry.version == "1" || entry.version == "2" else {
            throw VerificationError(.internalError, "storage: inbox entry version must be 1 or 2")
        }
        guard !entry.id.isEmpty, !entry.bundleId.isEmpty else {
            throw VerificationError(.internalError, "storage: inbox entry without an id or bundle id")
        }
        let eventJSON = try entry.event.map { (event) throws(VerificationError) in try NotificationJSON.eventText(event) }
        return [.text(entry.bundleId), .text(entry.id), .text(entry.version), .text(entry.notificationType),
                .text(entry.subtype), .integer(entry.signedDate), .text(entry.environment),
                .integer(entry.receivedAt), .blob(entry.rawBody), .text(eventJSON)]
    }

    /// Inserts an entry's row inside a write transaction (its own, or a batch's savepoint:
    /// `BatchedWriter`): true if inserted, false if it was there already (a duplicate delivery).
    static func insert(_ row: [SQLValue], _ connection: any SQLConnection) throws(VerificationError) -> Bool {
        try connection.run("""
            INSERT INTO notification_inbox (bundle_id, notification_id, version, notification_type, subtype,
                                            signed_date, environment, received_at, raw_body, event_json)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (bundle_id, notification_id) DO NOTHING
            """, row) == 1
    }

    // MARK: Processing

    public func processPending(limit: Int, now: Int64,
                               _ apply: (InboxEntry, SubscriptionState?) throws(VerificationError) -> LifecycleOutcome)
        throws(VerificationError) -> ProcessReport {
        // Entries are applied in batches, one transaction (one durable commit) each, every entry
        // inside its own savepoint: a failing entry rolls back alone, as if it had its own transaction.
        // Each batch claims its entries itself (`InboxDrain.claim`); `limit` bounds the entries claimed
        // in all (one left due, its chain held elsewhere, is claimed again by a later batch). On
        // PostgreSQL several batches are in flight, each on a connection of its own, so one batch's
        // round trips overlap another's: the caller's thread drains, and once a full batch showed
        // there is more, helper threads drain beside it.
        // An idle inbox is looked at with a plain read: polling it costs the writer no transaction.
        guard try database.withConnection({ (connection) throws(VerificationError) in
            try JobQueue.inbox.hasDue(now: now, connection)
        }) else { return ProcessReport() }
        return try withoutActuallyEscaping(apply) { (apply) throws(VerificationError) -> ProcessReport in
            let drain = InboxDrain(limit: limit, webhookAudience: webhookAudience, apply: apply)
            // `apply` must not outlive this call: no thread may reach it once the drain is over.
            defer { drain.end() }
            let batch = { @Sendable () throws(VerificationError) in try self.drainBatch(drain, now: now) }
            // The first batch alone: an idle inbox costs no thread.
            drain.runBatch(batch)
            let done = DispatchGroup()
            for _ in 0..<(drain.isOver ? 0 : drainBatchesInFlight - 1) {
                done.enter()
                Thread.detachNewThread {
                    drain.runBatches(batch)
                    done.leave()
                }
            }
            drain.runBatches(batch)
            done.wait()
            return try drain.report()
        }
    }

    /// Drain batches in flight at once: as many as the group commit leads at once on PostgreSQL (each
    /// on a connection of its own; inbox inserts and grants arriving meanwhile join the next batch);
    /// SQLite has one writer.
    private var drainBatchesInFlight: Int {
        (database as? any GroupCommittingDatabase)?.writes.batchesInFlight ?? 1
    }

    /// Claims and applies one batch of `drain` in one transaction, then counts its failures.
    func drainBatch(_ drain: InboxDrain, now: Int64) throws(VerificationError) {
        var claims: [InboxDrain.Claim] = []
        // The chains this batch claimed stay its own until its transaction ended (committed or
        // rolled back: the locks it took in the database are gone then too).
        defer { claims.forEach(drain.finish) }
        let applied = try database.transaction { (connection) throws(VerificationError) -> BatchResult in
            // A rerun after a transient conflict (group commit): the previous try was rolled back, with
            // the locks it took, so its chains must no longer count as held by a batch in flight.
            claims.forEach(drain.finish)
            claims.removeAll()
            var result = BatchResult()
            guard let claim = try drain.claim(now: now, connection) else { return result }
            claims.append(claim)
            // The chains' states and owners, read once for the batch after their locks are held: no
            // other transaction changes them before this one ends, and this batch's own changes are
            // carried forward below, entry by entry.
            var chains = try Self.readChains(claim.entries.filter { claim.mayApply($0.entry) }, now: now, connection)
            for (seq, entry) in claim.entries {
                try connection.deferScript("SAVEPOINT inbox_entry", operation: "savepoint")
                do throws(VerificationError) {
                    let outcome = try Self.applyDue(seq, entry, now: now, claim.mayApply(entry) ? chains : nil, drain, connection)
                    // Also the moment the entry's deferred writes report their failure, if any.
                    try connection.executeScript("RELEASE SAVEPOINT inbox_entry", operation: "savepoint")
                    if let outcome {
                        result.processed += 1
                        if outcome.unknownType { result.unknown += 1 }
                        if let state = outcome.newState { chains[ChainKey(state.bundleId, state.originalTransactionId)]?.carried = state }
                    }
                } catch {
                    // Nothing of this entry remains but the failure counted after the commit.
                    try connection.executeScript("ROLLBACK TO SAVEPOINT inbox_entry; RELEASE SAVEPOINT inbox_entry",
                                                 operation: "savepoint")
                    result.failures.append((seq, error.code))
                }
            }
            return result
        }
        var report = ProcessReport()
        report.processed = applied.processed
        report.unknown = applied.unknown
        for (seq, code) in applied.failures {
            report.failed += 1
            if try recordFailure(seq, code: code, now: now, policy: .standard) { report.parked += 1 }
        }
        drain.add(report)
    }

    /// Entries applied per commit: a durable commit costs a disk sync, an entry a few statements.
    static let entriesPerCommit = 16

    private struct BatchResult: Sendable {
        var processed = 0
        var unknown = 0
        var failures: [(Int64, VerificationError.Code)] = []
    }

    /// Takes up to `count` due entries, oldest first, for the caller's transaction; on PostgreSQL their
    /// rows stay locked until it ends, and rows another transaction holds are skipped, so two drainers
    /// never take the same entry (a row it finished meanwhile is re-read and no longer due).
    static func claimDue(_ count: Int, now: Int64, _ connection: any SQLConnection)
        throws(VerificationError) -> [(seq: Int64, entry: InboxEntry)] {
        try connection.query("""
            SELECT \(entryColumns), seq FROM notification_inbox
            WHERE processed_at IS NULL AND parked_at IS NULL AND next_attempt_at <= ?
            ORDER BY signed_date, received_at, seq LIMIT ?\(connection.dialect.lockRowsSkippingLocked)
            """, .integer(now), .integer(Int64(max(0, count)))) { (row) throws(VerificationError) in
            (try row.requiredInteger(10), try decodeEntry(row))
        }
    }

    /// Applies one claimed entry inside the caller's transaction: its outcome once applied, nil if
    /// it is not to be applied now (no `chains`: its chain is held by another transaction; it stays
    /// due for a later batch).
    private static func applyDue(_ seq: Int64, _ entry: InboxEntry, now: Int64, _ chains: [ChainKey: ChainRead]?,
                                 _ drain: InboxDrain, _ connection: any SQLConnection)
        throws(VerificationError) -> LifecycleOutcome? {
        let chain = ChainKey(of: entry)
        let read = chain.flatMap { chains?[$0] }
        if chain != nil, read == nil { return nil }
        let outcome = try drain.apply(entry, try read?.state())
        try record(outcome, of: entry, seq: seq, chain: chain?.originalTransactionId, owner: read?.owner, now: now,
                   webhookAudience: drain.webhookAudience, connection)
        return outcome
    }

    /// A purchase chain of one app: what a drain reads, applies and locks entries by.
    struct ChainKey: Hashable {
        let bundleId: String
        let originalTransactionId: String
        init(_ bundleId: String, _ originalTransactionId: String) {
            self.bundleId = bundleId
            self.originalTransactionId = originalTransactionId
        }

        /// The chain `entry` is about; nil for one about no purchase.
        init?(of entry: InboxEntry) {
            guard let originalTransactionId = entry.event?.originalTransactionId else { return nil }
            self.init(entry.bundleId, originalTransactionId)
        }

        /// The name of the chain's transaction lock (`trySerializeTransaction`).
        var lock: String { SQLLedger.chainLock(bundleId: bundleId, originalTransactionId: originalTransactionId) }
    }

    /// What applying a chain's entry reads: its stored state (nil for a new chain) and its owner.
    struct ChainRead {
        /// The stored state as read, decoded by each entry inside its own savepoint: a state that
        /// cannot be decoded fails that entry alone (counted, retried, parked), not the batch.
        let storedJSON: String?
        /// The state the batch's last applied entry of the chain left; it replaces the stored one.
        var carried: SubscriptionState?
        let owner: String?

        func state() throws(VerificationError) -> SubscriptionState? {
            if let carried { return carried }
            return try storedJSON.map(SQLLedger.decodeState)
        }
    }

    /// The stored state (undecoded) and owner of the chains `entries` name, in one statement. A chain
    /// with an older due entry outside `entries` (another drain's batch holds its row, refused the
    /// chain's lock) is left out: its entries wait for a later batch rather than overtake that one.
    private static func readChains(_ entries: [(seq: Int64, entry: InboxEntry)], now: Int64,
                                   _ connection: any SQLConnection) throws(VerificationError) -> [ChainKey: ChainRead] {
        // Each chain with its newest entry here (`entries` are in claim order, oldest first).
        var keys: [ChainKey] = []
        var newest: [ChainKey: (seq: Int64, entry: InboxEntry)] = [:]
        for claimed in entries {
            guard let key = ChainKey(of: claimed.entry) else { continue }
            if newest.updateValue(claimed, forKey: key) == nil { keys.append(key) }
        }
        guard let last = entries.last, !keys.isEmpty else { return [:] }
        func position(_ claimed: (seq: Int64, entry: InboxEntry)) -> [SQLValue] {
            [.integer(claimed.entry.signedDate), .integer(claimed.entry.receivedAt), .integer(claimed.seq)]
        }
        let chainValues = keys.flatMap { (key) -> [SQLValue] in
            [.text(key.bundleId), .text(key.originalTransactionId)] + (newest[key].map(position) ?? [])
        }
        let values = Array(repeating: "(CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT))",
                           count: keys.count).joined(separator: ", ")
        let seqs = Array(repeating: "?", count: entries.count).joined(separator: ", ")
        let rows = try connection.queryRows("""
            WITH chain (bundle_id, original_transaction_id, signed_date, received_at, seq) AS (VALUES \(values)),
            elsewhere AS MATERIALIZED (
                SELECT bundle_id, \(entryChain(connection.dialect)) AS original_transaction_id, signed_date, received_at, seq
                FROM notification_inbox
                WHERE processed_at IS NULL AND parked_at IS NULL AND next_attempt_at <= ?
                    AND (signed_date, received_at, seq) < (?, ?, ?) AND seq NOT IN (\(seqs)))
            SELECT chain.bundle_id, chain.original_transaction_id, s.state_json, o.account FROM chain
            LEFT JOIN subscription_states s
                ON s.bundle_id = chain.bundle_id AND s.original_transaction_id = chain.original_transaction_id
            LEFT JOIN ownership o ON o.bundle_id = chain.bundle_id AND o.ownership_key = chain.original_transaction_id
            WHERE NOT EXISTS (
                SELECT 1 FROM elsewhere e
                WHERE e.bundle_id = chain.bundle_id AND e.original_transaction_id = chain.original_transaction_id
                    AND (e.signed_date, e.received_at, e.seq) < (chain.signed_date, chain.received_at, chain.seq))
            """, chainValues + [.integer(now)] + position(last) + entries.map { .integer($0.seq) }) {
            (row) throws(VerificationError) in
            (ChainKey(try row.requiredText(0), try row.requiredText(1)), ChainRead(storedJSON: row.text(2), owner: row.text(3)))
        }
        return Dictionary(rows, uniquingKeysWith: { first, _ in first })
    }

    /// An inbox row's purchase chain in SQL: `LifecycleEvent.originalTransactionId` read from its
    /// `event_json` (NULL for an entry without one).
    static func entryChain(_ dialect: SQLDialect) -> String {
        let event = dialect.json("event_json")
        return """
            COALESCE(\(event) -> 'transaction' ->> 'originalTransactionId', \(event) -> 'transaction' ->> 'transactionId',
                     \(event) -> 'renewal' ->> 'originalTransactionId')
            """
    }

    /// Writes everything `outcome` says, then marks the entry processed; the caller's transaction
    /// makes it all-or-nothing. An outcome about another app or chain is a lifecycle bug: refused.
    private static func record(_ outcome: LifecycleOutcome, of entry: InboxEntry, seq: Int64, chain: String?,
                               owner: String?, now: Int64, webhookAudience: WebhookAudience, _ connection: any SQLConnection)
        throws(VerificationError) {
        if let state = outcome.newState {
            guard state.bundleId == entry.bundleId, let chain, state.originalTransactionId == chain else {
                throw VerificationError(.internalError, "storage: lifecycle outcome for another purchase chain")
            }
            try storeState(state, now: now, connection)
            // Deferred: the entry's RELEASE reports its failure, within the entry.
            if let owner { try storeEntitlement(state, of: owner, deferred: true, connection) }
        }
        for event in outcome.webhooks {
            guard event.bundleId == entry.bundleId else {
                throw VerificationError(.internalError, "storage: webhook event for another app")
            }
            // The consumption request is kept whether or not the app has a receiver: Apple still waits for its answer.
            try queueWebhook(event, now: now, audience: webhookAudience, connection)
            if event.kind == .consumptionRequested, let transactionId = event.transactionId {
                // Apple's 12-hour window runs from its request (signedDate), not from our receipt of it.
                // A later request for the same transaction needs a new answer; a replayed one does not.
                try connection.runDeferred("""
                    INSERT INTO consumption_requests (bundle_id, transaction_id, original_transaction_id, requested_at)
                    VALUES (?, ?, ?, ?)
                    ON CONFLICT (bundle_id, transaction_id) DO UPDATE SET
                        requested_at = excluded.requested_at, answered_at = NULL
                    WHERE excluded.requested_at > consumption_requests.requested_at
                    """, .text(entry.bundleId), .text(transactionId), .text(event.originalTransactionId),
                    .integer(entry.signedDate))
            }
        }
        try connection.runDeferred("""
            UPDATE notification_inbox SET processed_at = ?, unknown_type = ?, last_error_code = NULL WHERE seq = ?
            """, .integer(now), .integer(outcome.unknownType ? 1 : 0), .integer(seq))
    }

    private static func storeState(_ state: SubscriptionState, now: Int64, _ connection: any SQLConnection)
        throws(VerificationError) {
        try connection.runDeferred("""
            INSERT INTO subscription_states (bundle_id, original_transaction_id, product_id, state, expires_date,
                                             last_signed_date, state_json, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (bundle_id, original_transaction_id) DO UPDATE SET
                product_id = excluded.product_id, state = excluded.state, expires_date = excluded.expires_date,
                last_signed_date = excluded.last_signed_date, state_json = excluded.state_json,
                updated_at = excluded.updated_at
            """, .text(state.bundleId), .text(state.originalTransactionId), .text(state.productId),
            .text(state.state.rawValue), .integer(state.expiresDate), .integer(state.lastSignedDate),
            .text(try NotificationJSON.encode(state)), .integer(now))
    }

    /// Moves the owner's entitlement to the chain's state, unless the row holds a newer fact (a claim
    /// made after this notification was signed). `updated_at` is the fact's time: `lastSignedDate`
    /// here, the claim's `now` on the claim path. An unclaimed chain has no owner and no row yet.
    static func storeOwnerEntitlement(_ state: SubscriptionState, _ connection: any SQLConnection)
        throws(VerificationError) {
        guard let account = try ownerOf(state.originalTransactionId, bundleId: state.bundleId, connection) else { return }
        try storeEntitlement(state, of: account, deferred: false, connection)
    }

    /// `storeOwnerEntitlement` for an owner already read; `deferred` as `upsertEntitlement` takes it.
    private static func storeEntitlement(_ state: SubscriptionState, of account: String, deferred: Bool,
                                         _ connection: any SQLConnection) throws(VerificationError) {
        // In grace the product stays usable until the grace period ends, not until the lapsed expiry.
        try upsertEntitlement(bundleId: state.bundleId, account: account, originalTransactionId: state.originalTransactionId,
                              productId: state.productId, state: state.state.rawValue, expiresDate: state.periodEnd,
                              commitmentExpiresDate: state.commitmentExpiresDate, source: state.source, factTime: state.lastSignedDate,
                              deferred: deferred, connection)
    }

    /// Counts a failed attempt and schedules the next; true if the entry is now parked.
    private func recordFailure(_ seq: Int64, code: VerificationError.Code, now: Int64, policy: InboxRetryPolicy)
        throws(VerificationError) -> Bool {
        try database.transaction { (connection) throws(VerificationError) -> Bool in
            // An entry another instance processed meanwhile is left as it is.
            let previous = try connection.query("SELECT attempts FROM notification_inbox WHERE seq = ? AND processed_at IS NULL",
                                                .integer(seq)) { (row) throws(VerificationError) in
                try row.requiredInteger(0)
            }.first
            guard let previous else { return false }
            let attempts = Int(previous) + 1
            let parked = attempts >= policy.maxAttempts
            try connection.run("""
                UPDATE notification_inbox SET attempts = ?, last_error_code = ?, next_attempt_at = ?, parked_at = ?
                WHERE seq = ? AND processed_at IS NULL
                """, .integer(Int64(attempts)), .text(code.rawValue), .integer(now + policy.delay(afterAttempts: attempts)),
                .integer(parked ? now : nil), .integer(seq))
            return parked
        }
    }
}
