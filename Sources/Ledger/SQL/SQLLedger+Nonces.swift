import AppleTrust
import Foundation
import IAPCore

/// Single-use nonces: issued per app and account, stored as their SHA-256, spent once.
extension SQLLedger {
    public func issueNonce(bundleId: String, account: String, ttlSeconds: Int, now: Int64)
        throws(VerificationError) -> IssuedNonce {
        try database.transaction { (connection) throws(VerificationError) in
            try issueNonce(bundleId: bundleId, account: account, ttlSeconds: ttlSeconds, now: now, keyed: nil, on: connection)
        }
    }

    /// Issues a nonce inside the caller's write transaction; `keyed`: the call's `Idempotency-Key`
    /// and its answer, stored beside the nonce.
    func issueNonce(bundleId: String, account: String, ttlSeconds: Int, now: Int64,
                    keyed: (IdempotentWrite, @Sendable (IssuedNonce) -> String)?, on connection: any SQLConnection)
        throws(VerificationError) -> IssuedNonce {
        guard (1...86_400).contains(ttlSeconds) else {
            throw VerificationError(.invalidConfiguration, "nonce lifetime must be between 1 second and 1 day")
        }
        var generator = SystemRandomNumberGenerator()
        var bytes = [UInt8]()
        for _ in 0..<2 { withUnsafeBytes(of: generator.next() as UInt64) { bytes.append(contentsOf: $0) } }
        let value = Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        let expiresAt = now + Int64(ttlSeconds) * 1000
        try connection.run("""
            INSERT INTO nonces (value_sha256, bundle_id, account, issued_at, expires_at)
            VALUES (?, ?, ?, ?, ?)
            """, .text(SHA256Digest.lowercaseHex(value)), .text(bundleId), .text(account), .integer(now),
            .integer(expiresAt))
        let nonce = IssuedNonce(value: value, expiresAt: expiresAt)
        if let (write, answer) = keyed {
            try Self.storeAnswer(write, bundleId: bundleId, status: 200, body: answer(nonce), now: now, connection)
        }
        return nonce
    }

    /// Uses up a nonce; `by`: the keyed request using it (`IdempotentWrite.requestIdentity`), whose
    /// own retry may use it again (its first attempt may have spent it and then failed before its claim).
    public func consumeNonce(_ value: String, bundleId: String, account: String, now: Int64, by request: String? = nil)
        throws(VerificationError) {
        let invalid = VerificationError(.nonceInvalid, "the nonce is unknown, expired or not for this account")
        // Issued nonces are 22 characters; anything far longer is not worth hashing.
        guard !value.isEmpty, value.utf8.count <= 128 else { throw invalid }
        let hash = SHA256Digest.lowercaseHex(value)
        try database.withConnection { (connection) throws(VerificationError) in
            // The single conditional UPDATE is the whole guarantee: only one caller can flip consumed_at.
            let consumed = try connection.run("""
                UPDATE nonces SET consumed_at = ?, consumed_by = ?
                WHERE value_sha256 = ? AND bundle_id = ? AND account = ? AND expires_at > ?
                  AND (consumed_at IS NULL OR (consumed_by IS NOT NULL AND consumed_by = ?))
                """, .integer(now), .text(request), .text(hash), .text(bundleId), .text(account), .integer(now), .text(request))
            if consumed == 1 { return }
            // Explain the refusal; another app's or account's nonce looks exactly like an unknown one.
            let rows = try connection.query(
                "SELECT bundle_id, account, consumed_at FROM nonces WHERE value_sha256 = ?", .text(hash)
            ) { (row) throws(VerificationError) in
                (try row.requiredText(0), try row.requiredText(1), row.integer(2))
            }
            guard let (storedBundle, storedAccount, consumedAt) = rows.first,
                  storedBundle == bundleId, storedAccount == account else { throw invalid }
            if consumedAt != nil {
                throw VerificationError(.nonceReused, "the nonce was already used")
            }
            throw invalid
        }
    }
}
