import AppleTrust
import IAPCore

/// A granting call made with an `Idempotency-Key`: its answer is stored with the work it answers,
/// in the same transaction, so a retry whose first answer was lost (a timeout, a dropped
/// connection, a 503 that came before the commit) is answered the same, and nothing is granted twice.
public struct IdempotentWrite: Hashable, Sendable {
    /// The client's key (1–255 printable ASCII), unique per app.
    public var key: String
    /// Lowercase hex SHA-256 of what the call asked (route and body): the same key with another
    /// request is IDEMPOTENCY_KEY_REUSED, never a replay.
    public var requestSHA256: String
    /// Milliseconds since 1970 until which the answer is replayed (kept at least that long).
    public var expiresAt: Int64

    public init(key: String, requestSHA256: String, expiresAt: Int64) {
        self.key = key
        self.requestSHA256 = requestSHA256
        self.expiresAt = expiresAt
    }

    /// The one request this is (key and request together), as a nonce it used records it: that
    /// request's own retry may present the nonce again; any other request may not.
    public var requestIdentity: String { SHA256Digest.lowercaseHex("\(key)\n\(requestSHA256)") }

    /// Thrown by a keyed write whose key another call stored an answer for first (a retry that ran
    /// beside its first attempt, on this or another instance): its work is rolled back, and the
    /// stored answer is the one to give.
    public static let answeredElsewhere = VerificationError(.idempotencyKeyInFlight,
                                                            "another request with this Idempotency-Key was answered first")
}

/// An answer stored under an `Idempotency-Key`. Only the ledger makes one (it reads it back), so
/// the memberwise initialiser stays internal.
public struct StoredAnswer: Hashable, Sendable {
    public var requestSHA256: String
    public var status: Int
    /// The answer's body as it was sent (JSON text).
    public var body: String
}
