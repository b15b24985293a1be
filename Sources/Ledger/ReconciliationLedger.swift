import Foundation
import IAPCore

/// What reconciliation reads to choose which purchase chains to ask Apple about again.
public protocol ReconciliationLedger: Sendable {
    /// Chains of one app whose stored state may be stale: active or in grace with an end date
    /// before `expiringBefore` (near expiry or already past it), or in billing retry. Read from the
    /// lifecycle's `subscription_states` and from claimed entitlements (a chain no notification
    /// ever named). Distinct ids, soonest expiry first.
    func chainsToReconcile(bundleId: String, expiringBefore: Int64, limit: Int) throws(VerificationError) -> [String]

    /// Chains of one app with a sealed latest receipt (legacy re-verification), ordered by id.
    func chainsWithLatestReceipt(bundleId: String, limit: Int) throws(VerificationError) -> [String]
}

extension SQLLedger: ReconciliationLedger {
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
}
