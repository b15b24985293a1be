import Foundation
import IAPCore

/// The inbox as operators and the state machine read it: stored subscription states, entries by
/// time, parked entries, replay, raw-body retention.
extension SQLLedger {
    public func subscriptionState(bundleId: String, originalTransactionId: String)
        throws(VerificationError) -> SubscriptionState? {
        try database.withConnection { (connection) throws(VerificationError) in
            try Self.storedState(bundleId: bundleId, originalTransactionId: originalTransactionId, connection)
        }
    }

    static func storedState(bundleId: String, originalTransactionId: String, _ connection: any SQLConnection)
        throws(VerificationError) -> SubscriptionState? {
        let json = try connection.query(ClaimReads.stateQuery, .text(bundleId), .text(originalTransactionId)) {
            (row) throws(VerificationError) in
            try row.requiredText(0)
        }.first
        return try json.map(decodeState)
    }

    static func decodeState(_ json: String) throws(VerificationError) -> SubscriptionState {
        try NotificationJSON.decode(SubscriptionState.self, json)
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

    static let entryColumns = """
        notification_id, bundle_id, version, notification_type, subtype, signed_date, environment, received_at,
        raw_body, event_json
        """

    static func decodeEntry(_ row: SQLRow) throws(VerificationError) -> InboxEntry {
        let event = try row.text(9).map { (json) throws(VerificationError) in
            try NotificationJSON.decode(LifecycleEvent.self, json)
        }
        return InboxEntry(id: try row.requiredText(0), bundleId: try row.requiredText(1), version: try row.requiredText(2),
                          notificationType: try row.requiredText(3), subtype: row.text(4),
                          signedDate: try row.requiredInteger(5), environment: try row.requiredText(6),
                          receivedAt: try row.requiredInteger(7), rawBody: row.blob(8) ?? Data(), event: event)
    }
}
