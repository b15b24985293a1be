import Foundation
import IAPCore

extension SQLLedger {
    // MARK: Finish outbox (see FinishLedger)

    /// Inside a claim: queues a newly granted transaction for Finish Transaction if the claim asks
    /// for it (`PurchaseClaim.finishIfNewlyGranted`); never a local-test one (Xcode, LocalTesting:
    /// no App Store to tell).
    static func queueFinish(_ transaction: CanonicalTransaction, key: String, in claim: PurchaseClaim,
                            _ connection: any SQLConnection) throws(VerificationError) {
        guard claim.finishIfNewlyGranted.contains(transaction.transactionId),
              let environment = transaction.environment, environment == .production || environment == .sandbox
        else { return }
        try connection.run("""
            INSERT INTO finish_outbox (bundle_id, transaction_id, ownership_key, environment, created_at, next_attempt_at)
            VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (bundle_id, transaction_id) DO NOTHING
            """, .text(claim.bundleId), .text(transaction.transactionId), .text(key), .text(environment.rawValue),
            .integer(claim.now), .integer(claim.now))
    }

    public func leaseDueFinishes(now: Int64, limit: Int, leaseMillis: Int64, holder: String)
        throws(VerificationError) -> [PendingFinish] {
        guard try JobQueue.finishes.worthLeasing(now: now, leaseMillis: leaseMillis, holder: holder, in: database) else { return [] }
        return try database.transaction { (connection) throws(VerificationError) -> [PendingFinish] in
            let due = try connection.query("""
                SELECT bundle_id, transaction_id, ownership_key, environment, attempts FROM finish_outbox
                WHERE finished_at IS NULL AND dropped_at IS NULL AND next_attempt_at <= ?
                ORDER BY next_attempt_at, bundle_id, transaction_id LIMIT ?\(connection.dialect.lockRowsSkippingLocked)
                """, .integer(now), .integer(Int64(max(0, limit)))) { (row) throws(VerificationError) in
                (PendingFinish(bundleId: try row.requiredText(0), transactionId: try row.requiredText(1),
                               environment: AppStoreEnvironment(rawValue: try row.requiredText(3)), attempts: Int(try row.requiredInteger(4))),
                 try row.requiredText(2))
            }
            var taken: [PendingFinish] = []
            for (finish, chain) in due {
                // Checked when it is sent, not only when queued: a refund that arrived since (a
                // notification, reconciliation) means the content must not be reported delivered.
                if try Self.chainEndedByRefund(bundleId: finish.bundleId, chain: chain, connection) {
                    try connection.run("""
                        UPDATE finish_outbox SET dropped_at = ?, last_error_code = ? WHERE bundle_id = ? AND transaction_id = ?
                        """, .integer(now), .text(VerificationError.Code.transactionRevoked.rawValue),
                        .text(finish.bundleId), .text(finish.transactionId))
                    continue
                }
                try JobQueue.finishes.lease([.text(finish.bundleId), .text(finish.transactionId)], holder: holder,
                                            until: now + leaseMillis, connection)
                taken.append(finish)
            }
            return taken
        }
    }

    private static func chainEndedByRefund(bundleId: String, chain: String, _ connection: any SQLConnection)
        throws(VerificationError) -> Bool {
        let ended = try connection.query("""
            SELECT COUNT(*) FROM entitlements WHERE bundle_id = ? AND original_transaction_id = ? AND state IN ('refunded', 'revoked')
            """, .text(bundleId), .text(chain)) { (row) throws(VerificationError) in try row.requiredInteger(0) }.first ?? 0
        if ended > 0 { return true }
        return try storedState(bundleId: bundleId, originalTransactionId: chain, connection)
            .map { $0.state.isTakenBack } ?? false
    }

    @discardableResult
    public func markFinished(bundleId: String, transactionId: String, at now: Int64) throws(VerificationError) -> Bool {
        try database.withConnection { (connection) throws(VerificationError) -> Bool in
            try connection.run("""
                UPDATE finish_outbox SET finished_at = ?, attempts = attempts + 1, last_error_code = NULL, leased_by = NULL
                WHERE bundle_id = ? AND transaction_id = ? AND finished_at IS NULL AND dropped_at IS NULL
                """, .integer(now), .text(bundleId), .text(transactionId)) == 1
        }
    }

    public func markFinishFailed(bundleId: String, transactionId: String, code: String, nextAttemptAt: Int64, final: Bool,
                                 at now: Int64) throws(VerificationError) {
        _ = try database.withConnection { (connection) throws(VerificationError) in
            try connection.run("""
                UPDATE finish_outbox SET attempts = attempts + 1, last_error_code = ?, next_attempt_at = ?, dropped_at = ?,
                    leased_by = NULL
                WHERE bundle_id = ? AND transaction_id = ? AND finished_at IS NULL AND dropped_at IS NULL
                """, .text(code), .integer(nextAttemptAt), .integer(final ? now : nil), .text(bundleId), .text(transactionId))
        }
    }

    public func renewFinishLeases(_ keys: [FinishKey], holder: String, until: Int64) throws(VerificationError) -> Set<FinishKey> {
        let renewed = try JobQueue.finishes.renew(keys.map { [.text($0.bundleId), .text($0.transactionId)] }, holder: holder,
                                                  until: until, in: database)
        return Set(renewed.map { keys[$0] })
    }

    @discardableResult
    public func releaseFinishLeases(holder: String, now: Int64) throws(VerificationError) -> Int {
        try JobQueue.finishes.release(holder: holder, now: now, in: database)
    }

    public func finishEntries(bundleId: String) throws(VerificationError) -> [FinishEntry] {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT transaction_id, environment, attempts, next_attempt_at, finished_at, dropped_at, last_error_code
                FROM finish_outbox WHERE bundle_id = ? ORDER BY created_at, transaction_id
                """, .text(bundleId)) { (row) throws(VerificationError) in
                FinishEntry(transactionId: try row.requiredText(0), environment: AppStoreEnvironment(rawValue: try row.requiredText(1)),
                                   attempts: Int(try row.requiredInteger(2)), nextAttemptAt: try row.requiredInteger(3),
                                   finishedAt: row.integer(4), droppedAt: row.integer(5), lastErrorCode: row.text(6))
            }
        }
    }

    public func finishOutboxDepth() throws(VerificationError) -> FinishOutboxDepth {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT COALESCE(SUM(CASE WHEN finished_at IS NULL AND dropped_at IS NULL THEN 1 ELSE 0 END), 0),
                       COALESCE(SUM(CASE WHEN dropped_at IS NOT NULL AND last_error_code NOT IN (?, ?) THEN 1 ELSE 0 END), 0)
                FROM finish_outbox
                """, .text(VerificationError.Code.transactionRevoked.rawValue), .text(FinishOutboxDepth.finishingTurnedOff)) {
                (row) throws(VerificationError) in
                FinishOutboxDepth(pending: Int(try row.requiredInteger(0)), failed: Int(try row.requiredInteger(1)))
            }.first ?? FinishOutboxDepth(pending: 0, failed: 0)
        }
    }
}
