import Foundation
import IAPCore

extension SQLLedger {
    // MARK: Webhook outbox

    @discardableResult
    public func enqueueWebhooks(_ events: [WebhookEvent], now: Int64) throws(VerificationError) -> Int {
        try database.transaction { (connection) throws(VerificationError) -> Int in
            var added = 0
            for event in events where try insertWebhook(event, now: now, connection) { added += 1 }
            return added
        }
    }

    /// True if the event was stored new. The key is scoped to the app: two apps' keys never shadow
    /// each other. An event of an app outside `webhookAudience` is not stored (false).
    @discardableResult
    func insertWebhook(_ event: WebhookEvent, now: Int64, _ connection: any SQLConnection)
        throws(VerificationError) -> Bool {
        guard webhookAudience.includes(event.bundleId) else { return false }
        switch try connection.write(Self.insertWebhookSQL, try Self.webhookArguments(event, now: now)) {
        case .changed(let count): return count == 1
        case .constraintViolation: throw SQLConnectionErrors.constraintViolated
        }
    }

    /// `insertWebhook` when nobody needs to know whether the event was new (`deferWrite`).
    static func queueWebhook(_ event: WebhookEvent, now: Int64, audience: WebhookAudience, _ connection: any SQLConnection)
        throws(VerificationError) {
        guard audience.includes(event.bundleId) else { return }
        try connection.deferWrite(insertWebhookSQL, try webhookArguments(event, now: now))
    }

    private static let insertWebhookSQL = """
        INSERT INTO webhook_outbox (bundle_id, idempotency_key, event_json, created_at, next_attempt_at, chain_id)
        VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (bundle_id, idempotency_key) DO NOTHING
        """

    private static func webhookArguments(_ event: WebhookEvent, now: Int64) throws(VerificationError) -> [SQLValue] {
        guard !event.idempotencyKey.isEmpty else {
            throw VerificationError(.internalError, "storage: webhook event without an idempotency key")
        }
        return [.text(event.bundleId), .text(event.idempotencyKey), .text(try NotificationJSON.encode(event)),
                .integer(now), .integer(now), .text(event.originalTransactionId)]
    }

    public func dueWebhooks(now: Int64, limit: Int) throws(VerificationError) -> [OutboxEntry] {
        try database.withConnection { (connection) throws(VerificationError) in
            try Self.due(now: now, limit: limit, connection)
        }
    }

    public func leaseDueWebhooks(now: Int64, limit: Int, leaseMillis: Int64, holder: String)
        throws(VerificationError) -> [OutboxEntry] {
        guard try JobQueue.webhooks.worthLeasing(now: now, leaseMillis: leaseMillis, holder: holder, in: database) else { return [] }
        return try database.transaction { (connection) throws(VerificationError) -> [OutboxEntry] in
            // One lease at a time across instances (SQLite's one writer already is): each sees what the
            // one before it took, which the chain rule below reads.
            try connection.serializeTransaction(on: "webhook_outbox_lease")
            // Earliest first, and an event only with every earlier undelivered event of its chain
            // (those are due too: taken in this batch, by seq, ahead of it). One that is leased or
            // waits for its retry holds its chain's later events back.
            let due = try connection.query("""
                SELECT w.seq, w.event_json, w.attempts, w.next_attempt_at, o.account FROM webhook_outbox w
                LEFT JOIN ownership o ON o.bundle_id = w.bundle_id AND o.ownership_key = w.chain_id
                WHERE w.delivered_at IS NULL AND w.next_attempt_at <= ?
                    AND NOT EXISTS (
                        SELECT 1 FROM webhook_outbox p
                        WHERE p.bundle_id = w.bundle_id AND p.chain_id = w.chain_id AND p.seq < w.seq
                            AND p.delivered_at IS NULL AND p.next_attempt_at > ?)
                ORDER BY w.seq LIMIT ?
                """, .integer(now), .integer(now), .integer(Int64(max(0, limit)))) { (row) throws(VerificationError) in
                OutboxEntry(seq: try row.requiredInteger(0),
                            event: try NotificationJSON.decode(WebhookEvent.self, try row.requiredText(1)),
                            attempts: Int(try row.requiredInteger(2)), nextAttemptAt: try row.requiredInteger(3),
                            owner: row.text(4))
            }
            guard !due.isEmpty else { return [] }
            let taken = Set(try connection.queryRows("""
                UPDATE webhook_outbox SET next_attempt_at = ?, leased_by = ?
                WHERE seq IN (\(Self.placeholders(due.count))) AND delivered_at IS NULL AND next_attempt_at <= ?
                RETURNING seq
                """, [.integer(now + leaseMillis), .text(holder)] + due.map { .integer($0.seq) } + [.integer(now)]) {
                (row) throws(VerificationError) in try row.requiredInteger(0)
            })
            return due.filter { taken.contains($0.seq) }
        }
    }

    static func placeholders(_ count: Int) -> String { Array(repeating: "?", count: count).joined(separator: ", ") }

    public func markWebhooks(_ marks: [WebhookMark], holder: String, at now: Int64) throws(VerificationError) {
        guard !marks.isEmpty else { return }
        var delivered: [SQLValue] = [], released: [SQLValue] = []
        var failed: [(seq: Int64, nextAttemptAt: Int64)] = []
        for mark in marks {
            switch mark {
            case .delivered(let seq): delivered.append(.integer(seq))
            case .released(let seq): released.append(.integer(seq))
            case .failed(let seq, let nextAttemptAt): failed.append((seq, nextAttemptAt))
            }
        }
        try database.transaction { (connection) throws(VerificationError) in
            if !delivered.isEmpty { try Self.markDelivered(delivered, at: now, connection) }
            // A failure or a release counts only while the lease is still the holder's: an event another
            // instance took meanwhile is that one's to schedule.
            for (seq, next) in failed {
                _ = try connection.run("""
                    UPDATE webhook_outbox SET attempts = attempts + 1, next_attempt_at = ?, leased_by = NULL
                    WHERE seq = ? AND leased_by = ? AND delivered_at IS NULL
                    """, .integer(next), .integer(seq), .text(holder))
            }
            if !released.isEmpty {
                _ = try connection.run("""
                    UPDATE webhook_outbox SET next_attempt_at = ?, leased_by = NULL
                    WHERE seq IN (\(Self.placeholders(released.count))) AND leased_by = ? AND delivered_at IS NULL
                    """, [.integer(now)] + released + [.text(holder)])
            }
        }
    }

    private static func markDelivered(_ seqs: [SQLValue], at now: Int64, _ connection: any SQLConnection)
        throws(VerificationError) {
        // attempts counts the successful one too: it says how many requests the receiver saw.
        _ = try connection.run("""
            UPDATE webhook_outbox SET delivered_at = ?, attempts = attempts + 1
            WHERE seq IN (\(placeholders(seqs.count))) AND delivered_at IS NULL
            """, [.integer(now)] + seqs)
    }

    public func renewWebhookLeases(_ seqs: [Int64], holder: String, until: Int64) throws(VerificationError) -> Set<Int64> {
        let renewed = try JobQueue.webhooks.renew(seqs.map { [.integer($0)] }, holder: holder, until: until, in: database)
        return Set(renewed.map { seqs[$0] })
    }

    @discardableResult
    public func releaseWebhookLeases(holder: String, now: Int64) throws(VerificationError) -> Int {
        try JobQueue.webhooks.release(holder: holder, now: now, in: database)
    }

    private static func due(now: Int64, limit: Int, _ connection: any SQLConnection)
        throws(VerificationError) -> [OutboxEntry] {
        try connection.query("""
            SELECT seq, event_json, attempts, next_attempt_at FROM webhook_outbox
            WHERE delivered_at IS NULL AND next_attempt_at <= ? ORDER BY next_attempt_at, seq LIMIT ?
            """, .integer(now), .integer(Int64(max(0, limit)))) { (row) throws(VerificationError) in
            OutboxEntry(seq: try row.requiredInteger(0),
                        event: try NotificationJSON.decode(WebhookEvent.self, try row.requiredText(1)),
                        attempts: Int(try row.requiredInteger(2)), nextAttemptAt: try row.requiredInteger(3))
        }
    }

    public func markDelivered(_ seq: Int64, at now: Int64) throws(VerificationError) {
        try database.withConnection { (connection) throws(VerificationError) in
            try Self.markDelivered([.integer(seq)], at: now, connection)
        }
    }

    public func markFailed(_ seq: Int64, nextAttemptAt: Int64) throws(VerificationError) {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.run("""
                UPDATE webhook_outbox SET attempts = attempts + 1, next_attempt_at = ?, leased_by = NULL
                WHERE seq = ? AND delivered_at IS NULL
                """, .integer(nextAttemptAt), .integer(seq))
        }
    }

    public func outboxDepth() throws(VerificationError) -> Int {
        try database.withConnection { (connection) throws(VerificationError) in
            Int(try connection.query("SELECT COUNT(*) FROM webhook_outbox WHERE delivered_at IS NULL") {
                (row) throws(VerificationError) in try row.requiredInteger(0)
            }.first ?? 0)
        }
    }

    // MARK: Consumption requests

    public func pendingConsumptionRequests(notBefore: Int64, limit: Int) throws(VerificationError) -> [ConsumptionRequest] {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT bundle_id, transaction_id, original_transaction_id, requested_at FROM consumption_requests
                WHERE answered_at IS NULL AND requested_at >= ? ORDER BY requested_at, bundle_id, transaction_id LIMIT ?
                """, .integer(notBefore), .integer(Int64(max(0, limit)))) { (row) throws(VerificationError) in
                ConsumptionRequest(bundleId: try row.requiredText(0), transactionId: try row.requiredText(1),
                                   originalTransactionId: row.text(2), requestedAt: try row.requiredInteger(3))
            }
        }
    }

    @discardableResult
    public func markConsumptionAnswered(bundleId: String, transactionId: String, at now: Int64)
        throws(VerificationError) -> Bool {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.run("""
                UPDATE consumption_requests SET answered_at = ?
                WHERE bundle_id = ? AND transaction_id = ? AND answered_at IS NULL
                """, .integer(now), .text(bundleId), .text(transactionId)) == 1
        }
    }
}
