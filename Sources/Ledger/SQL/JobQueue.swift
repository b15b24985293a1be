import Foundation
import IAPCore

/// The lease mechanics every durable queue of background work in the ledger shares (the webhook
/// outbox, the finish outbox), written once over any table with these columns, on both engines:
/// a row is pending until its work is done or given up on (`pending`); a pending row is due at
/// `next_attempt_at`; a holder that takes it moves `next_attempt_at` to its lease's end and writes
/// its identity in `leased_by`; only that holder renews the lease, and a holder that restarts
/// (the same identity) releases at once what its previous incarnation held. Attempts, backoff and
/// the final failure are each queue's own columns, written by its marks.
struct JobQueue: Sendable {
    let table: String
    /// The columns that name one row, in the order a key's values are given.
    let keyColumns: [String]
    /// True while a row is pending (SQL, over `table`'s columns).
    let pending: String

    static let webhooks = JobQueue(table: "webhook_outbox", keyColumns: ["seq"], pending: "delivered_at IS NULL")
    static let finishes = JobQueue(table: "finish_outbox", keyColumns: ["bundle_id", "transaction_id"],
                                   pending: "finished_at IS NULL AND dropped_at IS NULL")
    /// The inbox's entries are taken by the drain's own transaction, not leased: rows and chain locks
    /// it holds end with it, so what a crashed drain had taken is due again at once, on either engine.
    static let inbox = JobQueue(table: "notification_inbox", keyColumns: ["seq"],
                                pending: "processed_at IS NULL AND parked_at IS NULL")

    private var keyMatch: String { keyColumns.map { "\($0) = ?" }.joined(separator: " AND ") }

    /// Whether any row is due at `now`: a plain read, so a worker polling an idle queue costs the
    /// writer no transaction.
    func hasDue(now: Int64, _ connection: any SQLConnection) throws(VerificationError) -> Bool {
        try !connection.query("SELECT 1 FROM \(table) WHERE \(pending) AND next_attempt_at <= ? LIMIT 1", .integer(now)) {
            (_) throws(VerificationError) in ()
        }.isEmpty
    }

    /// Before a lease: refuses one without a holder or lifetime (a caller's bug), and says whether
    /// anything is due, by a plain read (`hasDue`), so an idle queue opens no write transaction.
    func worthLeasing(now: Int64, leaseMillis: Int64, holder: String, in database: any SQLDatabase)
        throws(VerificationError) -> Bool {
        guard leaseMillis > 0, !holder.isEmpty else {
            throw VerificationError(.internalError, "storage: a lease of \(table) needs a holder and a positive lifetime")
        }
        return try database.withConnection { (connection) throws(VerificationError) in try hasDue(now: now, connection) }
    }

    /// Leases the row `key` names to `holder` until `until`, inside the caller's transaction.
    func lease(_ key: [SQLValue], holder: String, until: Int64, _ connection: any SQLConnection) throws(VerificationError) {
        _ = try connection.run("UPDATE \(table) SET next_attempt_at = ?, leased_by = ? WHERE \(keyMatch)",
                               [.integer(until), .text(holder)] + key)
    }

    /// Extends to `until` the leases `holder` still has among `keys` (pending, not taken by another
    /// holder since); returns the positions in `keys` of those renewed.
    func renew(_ keys: [[SQLValue]], holder: String, until: Int64, in database: any SQLDatabase)
        throws(VerificationError) -> Set<Int> {
        guard !keys.isEmpty else { return [] }
        return try database.transaction { (connection) throws(VerificationError) -> Set<Int> in
            var held: Set<Int> = []
            for (position, key) in keys.enumerated() where try connection.run("""
                UPDATE \(table) SET next_attempt_at = ? WHERE \(keyMatch) AND leased_by = ? AND \(pending)
                """, [.integer(until)] + key + [.text(holder)]) == 1 {
                held.insert(position)
            }
            return held
        }
    }

    /// Makes every pending row leased by `holder` due at `now`; returns how many.
    func release(holder: String, now: Int64, in database: any SQLDatabase) throws(VerificationError) -> Int {
        try database.withConnection { (connection) throws(VerificationError) -> Int in
            try connection.run("UPDATE \(table) SET next_attempt_at = ?, leased_by = NULL WHERE leased_by = ? AND \(pending)",
                               .integer(now), .text(holder))
        }
    }
}
