import Foundation
import IAPCore

extension SQLLedger {
    // MARK: Entitlements the clock ends

    public func advanceEntitlementsByClock(now: Int64, limit: Int) throws(VerificationError) -> Int {
        // The rows `EntitlementAccess` may move at `now` (the v5 index's predicate, verbatim).
        let due = try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT bundle_id, account, original_transaction_id FROM entitlements
                WHERE state IN ('active', 'gracePeriod') AND expires_date <= ?
                ORDER BY expires_date, bundle_id, account, original_transaction_id LIMIT ?
                """, .integer(now + EntitlementAccess.clockSkewAllowanceMillis), .integer(Int64(max(0, limit)))) {
                (row) throws(VerificationError) in (try row.requiredText(0), try row.requiredText(1), try row.requiredText(2))
            }
        }
        var moved = 0
        for (bundleId, account, chain) in due {
            let advanced = try database.transaction { (connection) throws(VerificationError) -> Bool in
                // The lock claims and the inbox take: the row is read again under it, so a fact that
                // arrived meanwhile (a renewal) is what gets judged, and two sweeps move it once.
                try connection.serializeTransaction(on: Self.chainLock(bundleId: bundleId, originalTransactionId: chain))
                let rows = try connection.query("""
                    SELECT product_id, state, expires_date FROM entitlements
                    WHERE bundle_id = ? AND account = ? AND original_transaction_id = ?
                    """, .text(bundleId), .text(account), .text(chain)) { (row) throws(VerificationError) in
                    guard let state = Entitlement.State(rawValue: try row.requiredText(1)) else { throw SQLRow.corrupt }
                    return (try row.requiredText(0), state, row.integer(2))
                }
                guard let (productId, recorded, periodEnd) = rows.first,
                      let event = EntitlementAccess.periodEnded(bundleId: bundleId, originalTransactionId: chain,
                                                                productId: productId, recorded: recorded,
                                                                periodEnd: periodEnd, now: now),
                      let next = event.state else { return false }
                // `updated_at` stays the time of the fact: the clock adds none, so any newer fact
                // (a claim, a notification) still replaces the row.
                try connection.run("""
                    UPDATE entitlements SET state = ? WHERE bundle_id = ? AND account = ? AND original_transaction_id = ?
                    """, .text(next.rawValue), .text(bundleId), .text(account), .text(chain))
                try self.insertWebhook(event, now: now, connection)
                return true
            }
            if advanced { moved += 1 }
        }
        return moved
    }
}
