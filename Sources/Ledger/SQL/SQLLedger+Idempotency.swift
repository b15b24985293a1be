import IAPCore

extension SQLLedger {
    /// The answer stored for `key` of app `bundleId`, unless it expired by `now`.
    public func idempotentAnswer(bundleId: String, key: String, now: Int64) throws(VerificationError) -> StoredAnswer? {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT request_sha256, status, body FROM idempotent_answers
                WHERE bundle_id = ? AND idempotency_key = ? AND expires_at > ?
                """, .text(bundleId), .text(key), .integer(now)) { (row) throws(VerificationError) in
                StoredAnswer(requestSHA256: try row.requiredText(0), status: Int(try row.requiredInteger(1)),
                             body: try row.requiredText(2))
            }.first
        }
    }

    /// Stores a keyed call's answer inside the caller's transaction (the work it answers is in the
    /// same one). An expired answer under the key gives way; a live one is
    /// `IdempotentWrite.answeredElsewhere`, which rolls the caller's work back with it.
    static func storeAnswer(_ write: IdempotentWrite, bundleId: String, status: Int, body: String, now: Int64,
                            _ connection: any SQLConnection) throws(VerificationError) {
        let stored = try connection.run("""
            INSERT INTO idempotent_answers (bundle_id, idempotency_key, request_sha256, status, body, created_at, expires_at)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (bundle_id, idempotency_key) DO UPDATE SET
                request_sha256 = excluded.request_sha256, status = excluded.status, body = excluded.body,
                created_at = excluded.created_at, expires_at = excluded.expires_at
            WHERE idempotent_answers.expires_at <= excluded.created_at
            """, .text(bundleId), .text(write.key), .text(write.requestSHA256), .integer(Int64(status)), .text(body),
            .integer(now), .integer(write.expiresAt))
        if stored != 1 { throw IdempotentWrite.answeredElsewhere }
    }

    /// Deletes the answers that expired by `now`; returns how many.
    public func purgeIdempotentAnswers(expiredBy now: Int64) throws(VerificationError) -> Int {
        try database.transaction { (connection) throws(VerificationError) in
            try connection.run("DELETE FROM idempotent_answers WHERE expires_at <= ?", .integer(now))
        }
    }
}
