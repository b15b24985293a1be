import Foundation
import IAPCore

/// What reconciliation reads to choose which purchase chains to ask Apple about again.
public protocol ReconciliationLedger: Sendable {
    /// Chains of one app whose stored state may be stale: active or in grace with an end date
    /// before `expiringBefore` (near expiry or already past it), or in billing retry. Read from the
    /// lifecycle's `subscription_states` and from claimed entitlements (a chain no notification
    /// ever named). Distinct ids, soonest expiry first.
    func chainsToReconcile(bundleId: String, expiringBefore: Int64, limit: Int) async throws(VerificationError) -> [String]

    /// Chains of one app with a sealed latest receipt (legacy re-verification), ordered by id.
    func chainsWithLatestReceipt(bundleId: String, limit: Int) async throws(VerificationError) -> [String]

    /// Takes or renews the lease `name` for `holder` until `now + ttlMillis`. True if `holder` now
    /// holds it: it was free, expired, or already `holder`'s. Across instances on one database at
    /// most one holder has an unexpired lease.
    func acquireLease(_ name: String, holder: String, now: Int64, ttlMillis: Int64) async throws(VerificationError) -> Bool

    /// Gives the lease up if `holder` has it, so another instance need not wait for it to expire.
    func releaseLease(_ name: String, holder: String) async throws(VerificationError)
}

extension SQLLedger {
    public func chainsToReconcile(bundleId: String, expiringBefore: Int64, limit: Int)
        throws(VerificationError) -> [String] {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT original_transaction_id, MIN(COALESCE(expires_date, 0)) AS soonest FROM (
                    SELECT original_transaction_id, expires_date, state FROM subscription_states WHERE bundle_id = ?
                    UNION ALL
                    SELECT original_transaction_id, expires_date, state FROM entitlements WHERE bundle_id = ?
                ) AS chains WHERE state = 'billingRetry'
                     OR (state IN ('active', 'gracePeriod') AND expires_date IS NOT NULL AND expires_date < ?)
                GROUP BY original_transaction_id ORDER BY soonest, original_transaction_id LIMIT ?
                """, .text(bundleId), .text(bundleId), .integer(expiringBefore), .integer(Int64(max(0, limit)))) {
                (row) throws(VerificationError) in try row.requiredText(0)
            }
        }
    }

    public func chainsWithLatestReceipt(bundleId: String, limit: Int) throws(VerificationError) -> [String] {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT original_transaction_id FROM latest_receipts WHERE bundle_id = ?
                ORDER BY original_transaction_id LIMIT ?
                """, .text(bundleId), .integer(Int64(max(0, limit)))) { (row) throws(VerificationError) in
                try row.requiredText(0)
            }
        }
    }

    public func acquireLease(_ name: String, holder: String, now: Int64, ttlMillis: Int64)
        throws(VerificationError) -> Bool {
        guard ttlMillis > 0, !name.isEmpty, !holder.isEmpty else {
            throw VerificationError(.internalError, "storage: a lease needs a name, a holder and a positive lifetime")
        }
        // One statement decides: the upsert changes the row only when it is free, expired or ours.
        return try database.withConnection { (connection) throws(VerificationError) -> Bool in
            try connection.run("""
                INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?)
                ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
                WHERE leases.expires_at <= ? OR leases.holder = excluded.holder
                """, .text(name), .text(holder), .integer(now + ttlMillis), .integer(now)) == 1
        }
    }

    public func releaseLease(_ name: String, holder: String) throws(VerificationError) {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.run("DELETE FROM leases WHERE name = ? AND holder = ?", .text(name), .text(holder))
        }
    }
}
