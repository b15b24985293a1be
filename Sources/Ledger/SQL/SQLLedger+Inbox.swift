import Foundation
import IAPCore

extension SQLLedger {
    // MARK: Enqueue

    public func enqueue(_ entry: InboxEntry) throws(VerificationError) -> Bool {
        try enqueue(batch: [entry])[0].get()
    }

    /// Inserts `entries` in one transaction (one commit, one fsync), each in a savepoint of its own
    /// when there are several, so one that fails is rolled back and answered alone: true for each
    /// inserted, false for one already there (a duplicate delivery), in order.
    public func enqueue(batch entries: [InboxEntry]) -> [Result<Bool, VerificationError>] {
        guard !entries.isEmpty else { return [] }
        let rows = entries.map { (entry) in Result { () throws(VerificationError) in try Self.inboxRow(entry) } }
        // The route answers Apple 200 on return, and Apple will not send it again: like every commit of
        // the ledger, this one is on disk before the call returns (a transaction, so that on SQLite
        // concurrent deliveries share one commit and its fsync).
        do throws(VerificationError) {
            let isolated = rows.count > 1
            return try database.transaction { (connection) throws(VerificationError) -> [Result<Bool, VerificationError>] in
                try rows.map { (row) throws(VerificationError) -> Result<Bool, VerificationError> in
                    guard case .success(let values) = row else { return row.map { _ in false } }
                    guard isolated else { return .success(try Self.insert(values, connection)) }
                    try connection.deferScript("SAVEPOINT inbox_insert", operation: "savepoint")
                    do throws(VerificationError) {
                        let inserted = try Self.insert(values, connection)
                        // Deferred: on PostgreSQL it goes with the next statement (the insert reported its own failure).
                        try connection.deferScript("RELEASE SAVEPOINT inbox_insert", operation: "savepoint")
                        return .success(inserted)
                    } catch {
                        try connection.executeScript("ROLLBACK TO SAVEPOINT inbox_insert; RELEASE SAVEPOINT inbox_insert",
                                                     operation: "savepoint")
                        return .failure(error)
                    }
                }
            }
        } catch {
            // Nothing was committed: every entry not refused on its own fails with the transaction.
            return rows.map { (row) in row.flatMap { _ in .failure(error) } }
        }
    }

    /// The row of an entry the inbox takes (checked, its event as text), for `insert`.
    private static func inboxRow(_ entry: InboxEntry) throws(VerificationError) -> [SQLValue] {
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

    /// True if inserted, false if the entry was there already.
    private static func insert(_ row: [SQLValue], _ connection: any SQLConnection) throws(VerificationError) -> Bool {
        let written = try connection.write("""
            INSERT INTO notification_inbox (bundle_id, notification_id, version, notification_type, subtype,
                                            signed_date, environment, received_at, raw_body, event_json)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (bundle_id, notification_id) DO NOTHING
            """, row)
        guard case .changed(let count) = written else { throw SQLConnectionErrors.constraintViolated }
        return count == 1
    }

    // MARK: Processing

    public func processPending(limit: Int, now: Int64,
                               _ apply: (InboxEntry, SubscriptionState?) throws(VerificationError) -> LifecycleOutcome)
        throws(VerificationError) -> ProcessReport {
        let policy = InboxRetryPolicy.standard
        var report = ProcessReport()
        // Entries are applied in batches, one transaction (one durable commit) each, every entry
        // inside its own savepoint: a failing entry rolls back alone, as if it had its own transaction.
        // Each batch claims its entries itself, in one statement; `limit` bounds the entries claimed
        // in all (one left due, its chain held by another instance, is claimed again by the next batch).
        var claimed = 0
        while claimed < limit {
            let size = min(Self.entriesPerCommit, limit - claimed)
            let applied = try database.transaction { (connection) throws(VerificationError) -> BatchResult in
                var result = BatchResult()
                let entries = try Self.claimDue(size, now: now, connection)
                result.claimed = entries.count
                for (seq, entry) in entries {
                    try connection.deferScript("SAVEPOINT inbox_entry", operation: "savepoint")
                    do throws(VerificationError) {
                        if let unknown = try Self.applyDue(seq, entry, now: now, apply, connection) {
                            result.processed += 1
                            if unknown { result.unknown += 1 }
                        }
                        // Also the moment the entry's deferred writes report their failure, if any.
                        try connection.executeScript("RELEASE SAVEPOINT inbox_entry", operation: "savepoint")
                    } catch {
                        // Nothing of this entry remains but the failure counted after the commit.
                        try connection.executeScript("ROLLBACK TO SAVEPOINT inbox_entry; RELEASE SAVEPOINT inbox_entry",
                                                     operation: "savepoint")
                        result.failures.append((seq, error.code))
                    }
                }
                return result
            }
            claimed += applied.claimed
            report.processed += applied.processed
            report.unknown += applied.unknown
            for (seq, code) in applied.failures {
                report.failed += 1
                if try recordFailure(seq, code: code, now: now, policy: policy) { report.parked += 1 }
            }
            if applied.claimed < size { break }
        }
        return report
    }

    /// Entries applied per commit: a durable commit costs a disk sync, an entry a few statements.
    static let entriesPerCommit = 16

    private struct BatchResult: Sendable {
        var claimed = 0
        var processed = 0
        var unknown = 0
        var failures: [(Int64, VerificationError.Code)] = []
    }

    /// Takes up to `count` due entries, oldest first, for the caller's transaction; on PostgreSQL their
    /// rows stay locked until it ends, and rows another instance holds are skipped, so two drainers
    /// never take the same entry (a row it finished meanwhile is re-read and no longer due).
    private static func claimDue(_ count: Int, now: Int64, _ connection: any SQLConnection)
        throws(VerificationError) -> [(seq: Int64, entry: InboxEntry)] {
        try connection.query("""
            SELECT \(entryColumns), seq FROM notification_inbox
            WHERE processed_at IS NULL AND parked_at IS NULL AND next_attempt_at <= ?
            ORDER BY signed_date, received_at, seq LIMIT ?\(connection.dialect.lockRowsSkippingLocked)
            """, .integer(now), .integer(Int64(max(0, count)))) { (row) throws(VerificationError) in
            (try row.requiredInteger(10), try decodeEntry(row))
        }
    }

    /// Applies one claimed entry inside the caller's transaction: true/false (its type was unknown or
    /// not) once applied, nil if it is not to be applied now (its chain held by another instance's
    /// transaction: it stays due for the next pass).
    private static func applyDue(_ seq: Int64, _ entry: InboxEntry, now: Int64,
                                 _ apply: (InboxEntry, SubscriptionState?) throws(VerificationError) -> LifecycleOutcome,
                                 _ connection: any SQLConnection) throws(VerificationError) -> Bool? {
        let chain = entry.event?.originalTransactionId
        // Two entries of one chain taken by two instances must not both read the old state. No
        // waiting here: a batch holding one chain while waiting for another could deadlock.
        if let chain, !(try connection.trySerializeTransaction(on: "chain:\(entry.bundleId):\(chain)")) { return nil }
        let stored = try chain.flatMap { (chain) throws(VerificationError) in
            try storedState(bundleId: entry.bundleId, originalTransactionId: chain, connection)
        }
        let outcome = try apply(entry, stored)
        try record(outcome, of: entry, seq: seq, chain: chain, now: now, connection)
        return outcome.unknownType
    }

    /// Writes everything `outcome` says, then marks the entry processed; the caller's transaction
    /// makes it all-or-nothing. An outcome about another app or chain is a lifecycle bug: refused.
    private static func record(_ outcome: LifecycleOutcome, of entry: InboxEntry, seq: Int64, chain: String?,
                               now: Int64, _ connection: any SQLConnection) throws(VerificationError) {
        if let state = outcome.newState {
            guard state.bundleId == entry.bundleId, let chain, state.originalTransactionId == chain else {
                throw VerificationError(.internalError, "storage: lifecycle outcome for another purchase chain")
            }
            try storeState(state, now: now, connection)
            try storeOwnerEntitlement(state, connection)
        }
        for event in outcome.webhooks {
            guard event.bundleId == entry.bundleId else {
                throw VerificationError(.internalError, "storage: webhook event for another app")
            }
            try queueWebhook(event, now: now, connection)
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
        // In grace the product stays usable until the grace period ends, not until the lapsed expiry.
        try upsertEntitlement(bundleId: state.bundleId, account: account, originalTransactionId: state.originalTransactionId,
                              productId: state.productId, state: state.state.rawValue, expiresDate: state.periodEnd,
                              commitmentExpiresDate: state.commitmentExpiresDate, source: state.source, factTime: state.lastSignedDate, connection)
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

    // MARK: Reads, replay, retention

    public func subscriptionState(bundleId: String, originalTransactionId: String)
        throws(VerificationError) -> SubscriptionState? {
        try database.withConnection { (connection) throws(VerificationError) in
            try Self.storedState(bundleId: bundleId, originalTransactionId: originalTransactionId, connection)
        }
    }

    static func storedState(bundleId: String, originalTransactionId: String, _ connection: any SQLConnection)
        throws(VerificationError) -> SubscriptionState? {
        let json = try connection.query("""
            SELECT state_json FROM subscription_states WHERE bundle_id = ? AND original_transaction_id = ?
            """, .text(bundleId), .text(originalTransactionId)) { (row) throws(VerificationError) in
            try row.requiredText(0)
        }.first
        return try json.map { (json) throws(VerificationError) in try NotificationJSON.decode(SubscriptionState.self, json) }
    }

    public func inboxDepth() throws(VerificationError) -> InboxDepth {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT COALESCE(SUM(CASE WHEN parked_at IS NULL THEN 1 ELSE 0 END), 0),
                       COALESCE(SUM(CASE WHEN parked_at IS NULL AND attempts > 0 THEN 1 ELSE 0 END), 0),
                       COALESCE(SUM(CASE WHEN parked_at IS NOT NULL THEN 1 ELSE 0 END), 0)
                FROM notification_inbox WHERE processed_at IS NULL
                """) { (row) throws(VerificationError) in
                InboxDepth(pending: Int(try row.requiredInteger(0)), retrying: Int(try row.requiredInteger(1)),
                           parked: Int(try row.requiredInteger(2)))
            }.first ?? InboxDepth(pending: 0, retrying: 0, parked: 0)
        }
    }

    public func inboxEntries(bundleId: String, since: Int64, limit: Int) throws(VerificationError) -> [InboxEntry] {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT \(Self.entryColumns) FROM notification_inbox WHERE bundle_id = ? AND signed_date >= ?
                ORDER BY signed_date, received_at, seq LIMIT ?
                """, .text(bundleId), .integer(since), .integer(Int64(max(0, limit))), decode: Self.decodeEntry)
        }
    }

    @discardableResult
    public func markForReplay(bundleId: String, since: Int64) throws(VerificationError) -> Int {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.run("""
                UPDATE notification_inbox SET processed_at = NULL, parked_at = NULL, attempts = 0, next_attempt_at = 0,
                                              last_error_code = NULL
                WHERE bundle_id = ? AND signed_date >= ?
                """, .text(bundleId), .integer(since))
        }
    }

    public func parkedEntries(limit: Int) throws(VerificationError) -> [ParkedInboxEntry] {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT bundle_id, notification_id, notification_type, attempts, last_error_code FROM notification_inbox
                WHERE parked_at IS NOT NULL AND processed_at IS NULL ORDER BY signed_date, received_at, seq LIMIT ?
                """, .integer(Int64(max(0, limit)))) { (row) throws(VerificationError) in
                ParkedInboxEntry(bundleId: try row.requiredText(0), id: try row.requiredText(1),
                                 notificationType: try row.requiredText(2), attempts: Int(try row.requiredInteger(3)),
                                 lastErrorCode: row.text(4))
            }
        }
    }

    @discardableResult
    public func purgeRawBodies(olderThan: Int64) throws(VerificationError) -> Int {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.run("UPDATE notification_inbox SET raw_body = NULL WHERE received_at < ? AND raw_body IS NOT NULL",
                               .integer(olderThan))
        }
    }

    public func unknownNotificationCounts() throws(VerificationError) -> [UnknownNotificationCount] {
        // Counted from the rows, not a counter: a replayed or retried entry is still one notification.
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT bundle_id, notification_type, subtype, COUNT(*) FROM notification_inbox WHERE unknown_type = 1
                GROUP BY bundle_id, notification_type, subtype ORDER BY bundle_id, notification_type, subtype
                """) { (row) throws(VerificationError) in
                UnknownNotificationCount(bundleId: try row.requiredText(0), notificationType: try row.requiredText(1),
                                         subtype: row.text(2), count: Int(try row.requiredInteger(3)))
            }
        }
    }

    private static let entryColumns = """
        notification_id, bundle_id, version, notification_type, subtype, signed_date, environment, received_at,
        raw_body, event_json
        """

    private static func decodeEntry(_ row: SQLRow) throws(VerificationError) -> InboxEntry {
        let event = try row.text(9).map { (json) throws(VerificationError) in
            try NotificationJSON.decode(LifecycleEvent.self, json)
        }
        return InboxEntry(id: try row.requiredText(0), bundleId: try row.requiredText(1), version: try row.requiredText(2),
                          notificationType: try row.requiredText(3), subtype: row.text(4),
                          signedDate: try row.requiredInteger(5), environment: try row.requiredText(6),
                          receivedAt: try row.requiredInteger(7), rawBody: row.blob(8) ?? Data(), event: event)
    }
}

/// The model's Codable form with sorted keys, so equal values are equal text.
enum NotificationJSON {
    static func encode<T: Encodable>(_ value: T) throws(VerificationError) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(value), let text = String(data: data, encoding: .utf8) else {
            throw VerificationError(.internalError, "storage: a value could not be encoded as JSON")
        }
        return text
    }

    static func decode<T: Decodable>(_ type: T.Type, _ json: String) throws(VerificationError) -> T {
        guard let value = try? JSONDecoder().decode(type, from: Data(json.utf8)) else { throw SQLRow.corrupt }
        return value
    }
}
