import Foundation
import IAPCore

extension SQLLedger {
    public func recordAudit(_ record: AuditRecord) throws(VerificationError) {
        try database.withConnection { (connection) throws(VerificationError) in
            try Self.insertAudit(record, connection)
        }
    }

    /// `deferred`: sent with the transaction's next statement (`SQLConnection.deferWrite`), inside one only.
    static func insertAudit(_ record: AuditRecord, deferred: Bool = false, _ connection: any SQLConnection) throws(VerificationError) {
        // The digest's shape is checked so that no caller can slip the evidence itself into the log.
        let digest = record.evidenceSHA256
        guard digest.utf8.count == 64, digest.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else {
            throw VerificationError(.internalError, "storage: audit evidence digest is not lowercase hex SHA-256")
        }
        let sql = """
            INSERT INTO audit_log (time, bundle_id, account, evidence_kind, evidence_sha256, transaction_ids,
                                   product_ids, environment, verdict, error_code, adapter, latency_micros,
                                   request_id, client_version, apple_status)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """
        let row: [SQLValue] = [.integer(record.time), .text(record.bundleId), .text(record.account), .text(record.evidenceKind),
            .text(digest), .text(try jsonArray(record.transactionIds)), .text(try jsonArray(record.productIds)),
            .text(record.environment), .text(record.verdict.rawValue), .text(record.errorCode?.rawValue),
            .text(record.adapter), .integer(record.latencyMicros), .text(record.requestId),
            .text(AuditRecord.clientVersion(record.clientVersion)), .text(record.appleStatus)]
        if deferred { try connection.deferWrite(sql, row) } else { try connection.run(sql, row) }
    }

    public func auditRecords(bundleId: String, limit: Int) throws(VerificationError) -> [AuditRecord] {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("SELECT \(Self.auditColumns) FROM audit_log WHERE bundle_id = ? ORDER BY id DESC LIMIT ?",
                                 .text(bundleId), .integer(Int64(max(0, limit)))) { (row) throws(VerificationError) in
                try Self.decodeAudit(row, bundleId: bundleId)
            }
        }
    }

    public func purgeAudit(olderThan cutoff: Int64) throws(VerificationError) -> Int {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.run("DELETE FROM audit_log WHERE time < ?", .integer(cutoff))
        }
    }

    public func supportHistory(bundleId: String, subject: SupportSubject, since: Int64, limit: Int)
        throws(VerificationError) -> SupportHistory {
        let limit = max(1, limit)
        return try database.withConnection { (connection) throws(VerificationError) in
            var attempts: [AuditRecord]
            let chainKeys: [String]
            switch subject {
            case .account(let account):
                attempts = try connection.query("""
                    SELECT \(Self.auditColumns) FROM audit_log
                    WHERE bundle_id = ? AND account = ? AND time >= ? ORDER BY time DESC, id DESC LIMIT ?
                    """, .text(bundleId), .text(account), .integer(since), .integer(Int64(limit + 1)))
                    { (row) throws(VerificationError) in try Self.decodeAudit(row, bundleId: bundleId) }
                chainKeys = try connection.query("""
                    SELECT ownership_key FROM ownership WHERE bundle_id = ? AND account = ? ORDER BY ownership_key
                    """, .text(bundleId), .text(account)) { (row) throws(VerificationError) in try row.requiredText(0) }
            case .transaction(let transactionId):
                // The chain is the transaction's ownership key (a granted transaction), or the id itself
                // when it is an original transaction id. Attempts are those that named either.
                let granted = try connection.query("""
                    SELECT ownership_key FROM transactions WHERE bundle_id = ? AND transaction_id = ?
                    """, .text(bundleId), .text(transactionId)) { (row) throws(VerificationError) in try row.requiredText(0) }
                let chain = granted.first ?? transactionId
                attempts = try connection.query("""
                    SELECT \(Self.auditColumns) FROM audit_log
                    WHERE bundle_id = ? AND time >= ?
                      AND (transaction_ids LIKE ? ESCAPE '!' OR transaction_ids LIKE ? ESCAPE '!')
                    ORDER BY time DESC, id DESC LIMIT ?
                    """, .text(bundleId), .integer(since), .text(Self.elementPattern(transactionId)),
                    .text(Self.elementPattern(chain)), .integer(Int64(limit + 1)))
                    { (row) throws(VerificationError) in try Self.decodeAudit(row, bundleId: bundleId) }
                chainKeys = try Self.ownerOf(chain, bundleId: bundleId, connection) == nil ? [] : [chain]
            }
            let truncated = attempts.count > limit
            if truncated { attempts.removeLast() }
            var chains: [PurchaseChainHistory] = []
            for key in chainKeys {
                if let chain = try Self.chainHistory(bundleId: bundleId, chain: key, connection) { chains.append(chain) }
            }
            return SupportHistory(attempts: attempts, chains: chains, truncated: truncated)
        }
    }

    private static func chainHistory(bundleId: String, chain: String, _ connection: any SQLConnection)
        throws(VerificationError) -> PurchaseChainHistory? {
        let owners = try connection.query("""
            SELECT account, bound_at FROM ownership WHERE bundle_id = ? AND ownership_key = ?
            """, .text(bundleId), .text(chain)) { (row) throws(VerificationError) in
            (try row.requiredText(0), try row.requiredInteger(1))
        }
        guard let (owner, boundAt) = owners.first else { return nil }
        let stored = try connection.query("""
            SELECT canonical_json, first_granted_at, updated_at FROM transactions
            WHERE bundle_id = ? AND ownership_key = ? ORDER BY first_granted_at, transaction_id
            """, .text(bundleId), .text(chain)) { (row) throws(VerificationError) in
            (try row.requiredText(0), try row.requiredInteger(1), try row.requiredInteger(2))
        }
        var grants: [PurchaseChainHistory.Grant] = []
        for (json, first, updated) in stored {
            grants.append(.init(transaction: try decode(json), firstGrantedAt: first, updatedAt: updated))
        }
        let entitlement = try entitlements(bundleId: bundleId, account: owner, connection)
            .first { $0.originalTransactionId == chain }
        // The inbox keeps each notification's decoded event, not its chain: the pattern narrows the
        // read, the decoded event decides.
        let rows = try connection.query("""
            SELECT event_json, notification_type, subtype, signed_date, received_at, environment, processed_at, parked_at
            FROM notification_inbox WHERE bundle_id = ? AND event_json LIKE ? ESCAPE '!' ORDER BY signed_date, seq
            """, .text(bundleId), .text("%\"originalTransactionId\":" + likeEscaped(JSONValue.string(chain).jsonText) + "%"))
            { (row) throws(VerificationError) in
            (try row.requiredText(0), PurchaseChainHistory.Notification(
                notificationType: try row.requiredText(1), subtype: row.text(2), signedDate: try row.requiredInteger(3),
                receivedAt: try row.requiredInteger(4), environment: try row.requiredText(5),
                status: row.integer(6) != nil ? "processed" : row.integer(7) != nil ? "parked" : "pending"))
        }
        var notifications: [PurchaseChainHistory.Notification] = []
        for (json, notification) in rows where try NotificationJSON.decode(LifecycleEvent.self, json).originalTransactionId == chain {
            notifications.append(notification)
        }
        return PurchaseChainHistory(originalTransactionId: chain, owner: owner, boundAt: boundAt, grants: grants,
                                    entitlement: entitlement,
                                    subscription: try storedState(bundleId: bundleId, originalTransactionId: chain, connection),
                                    notifications: notifications)
    }

    private static let auditColumns = """
        time, account, evidence_kind, evidence_sha256, transaction_ids, product_ids, environment,
        verdict, error_code, adapter, latency_micros, request_id, client_version, apple_status
        """

    /// Rows of `auditColumns`; the bundle id is the query's.
    private static func decodeAudit(_ row: SQLRow, bundleId: String) throws(VerificationError) -> AuditRecord {
        guard let verdict = AuditVerdict(rawValue: try row.requiredText(7)) else { throw SQLRow.corrupt }
        return AuditRecord(
            time: try row.requiredInteger(0), bundleId: bundleId, account: row.text(1),
            evidenceKind: try row.requiredText(2), evidenceSHA256: try row.requiredText(3),
            transactionIds: try strings(try row.requiredText(4)),
            productIds: try strings(try row.requiredText(5)), environment: row.text(6),
            verdict: verdict, errorCode: row.text(8).map { VerificationError.Code(rawValue: $0) },
            adapter: row.text(9), latencyMicros: try row.requiredInteger(10), requestId: row.text(11),
            clientVersion: row.text(12), appleStatus: row.text(13))
    }

    /// A LIKE pattern matching a JSON array of strings that has `element` as one of its elements.
    private static func elementPattern(_ element: String) -> String {
        "%" + likeEscaped(JSONValue.string(element).jsonText) + "%"
    }

    /// `text` with LIKE's wildcards and the escape character itself escaped by '!'.
    private static func likeEscaped(_ text: String) -> String {
        var out = ""
        for c in text {
            if c == "%" || c == "_" || c == "!" { out.append("!") }
            out.append(c)
        }
        return out
    }

    private static func jsonArray(_ values: [String]) throws(VerificationError) -> String {
        JSONValue.array(values.map(JSONValue.string)).jsonText
    }

    private static func strings(_ json: String) throws(VerificationError) -> [String] {
        guard let values = try? JSONDecoder().decode([String].self, from: Data(json.utf8)) else { throw SQLRow.corrupt }
        return values
    }
}
