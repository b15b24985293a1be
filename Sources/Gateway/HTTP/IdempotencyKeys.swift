import AppleTrust
import HTTPServer
import IAPConfig
import IAPCore
import Ledger
import Synchronization

/// `Idempotency-Key` on the calls that grant or hand out something once (verify, nonces, offer
/// signatures), as payment APIs take it: the first completed answer for (app, key) is stored with
/// the work it answers, in the same transaction, and a retry of the same request is answered the
/// same, marked `Idempotent-Replayed: true`. So a backend that lost an answer (a timeout, a dropped
/// connection, a 503) retries with the same key and still learns what was `newlyGranted`.
///
/// The same key with another request is IDEMPOTENCY_KEY_REUSED (422); a retry while the first
/// attempt is still being answered on this instance is IDEMPOTENCY_KEY_IN_FLIGHT (409, Retry-After);
/// on another instance both run, and the one whose answer commits second is rolled back and
/// answered with the first's (`IdempotentWrite.answeredElsewhere`). Only completed answers are
/// stored: a refusal is answered again by running the request again, which grants nothing.
final class IdempotencyKeys: Middleware {
    static let header = "Idempotency-Key"
    static let replayedHeader = "Idempotent-Replayed"
    /// The longest key taken (as the IETF draft's and Stripe's).
    static let maxKeyLength = 255

    static let refusals = [
        OpenAPIRefusal(status: "409", description: "a request with the same Idempotency-Key is still being answered (IDEMPOTENCY_KEY_IN_FLIGHT); see Retry-After",
                       headers: ["Retry-After"]),
        OpenAPIRefusal(status: "422", description: "the Idempotency-Key was first sent with another request (IDEMPOTENCY_KEY_REUSED)"),
        OpenAPIRefusal(status: "503", description: "STORAGE_OUTCOME_UNKNOWN: retry with the same Idempotency-Key to learn its outcome"),
    ]

    private let ledger: any Ledger
    /// How long an answer is replayed, in milliseconds.
    private let retentionMillis: Int64
    private let now: @Sendable () -> Int64
    /// (app, key) of the keyed requests this instance is answering now.
    private let inFlight = Mutex(Set<String>())

    init(ledger: any Ledger, retentionHours: Int64, now: @escaping @Sendable () -> Int64) {
        self.ledger = ledger
        retentionMillis = retentionHours * 3_600_000
        self.now = now
    }

    /// Runs the rest of the route with the request's key in its context (nil: it sent none), or
    /// replays the answer stored for that key. The route's name tells requests with the same body
    /// on two routes apart.
    func handle(_ request: HTTPRequest, context: RequestContext, next: Responder) async throws(VerificationError) -> HTTPResponse {
        let keys = request.headers.values(for: Self.header)
        guard let key = keys.first else { return try await next(request, context) }
        guard keys.count == 1, Self.isWellFormed(key) else {
            throw VerificationError(.malformedRequest, "\(Self.header) must be sent once, 1-\(Self.maxKeyLength) printable ASCII characters")
        }
        let app = try context.requiredApp()
        let write = IdempotentWrite(key: key, requestSHA256: Self.requestDigest(route: context.match.name, body: request.body),
                                    expiresAt: now() + retentionMillis)
        let slot = "\(app.bundleId)\u{0}\(key)"
        guard inFlight.withLock({ $0.insert(slot).inserted }) else { throw Self.stillInFlight }
        defer { _ = inFlight.withLock { $0.remove(slot) } }
        if let replayed = try await replay(app, write) { return replayed }
        var keyed = context
        keyed.idempotency = write
        do {
            return try await next(request, keyed)
        } catch where error == IdempotentWrite.answeredElsewhere {
            guard let replayed = try await replay(app, write) else { throw Self.stillInFlight }
            return replayed
        }
    }

    private static let stillInFlight = VerificationError(.idempotencyKeyInFlight,
                                                         "a request with this \(header) is still being answered; retry after Retry-After",
                                                         retryAfterSeconds: 1)

    /// 1 to 255 characters, each printable ASCII (space through tilde).
    static func isWellFormed(_ key: String) -> Bool {
        let bytes = key.utf8
        return (1...maxKeyLength).contains(bytes.count) && bytes.allSatisfy { (0x20...0x7E).contains($0) }
    }

    /// What the key promises to answer: this route with this body, byte for byte.
    static func requestDigest(route: String, body: [UInt8]) -> String {
        SHA256Digest.lowercaseHex(Array(route.utf8) + [0] + body)
    }

    /// The answer stored under `write`'s key, replayed; nil when none is (or it expired).
    private func replay(_ app: AppPolicy, _ write: IdempotentWrite) async throws(VerificationError) -> HTTPResponse? {
        guard let stored = try await ledger.idempotentAnswer(bundleId: app.bundleId, key: write.key, now: now()) else { return nil }
        guard stored.requestSHA256 == write.requestSHA256 else {
            throw VerificationError(.idempotencyKeyReused, "this \(Self.header) was first sent with another request; use a new key for a new request")
        }
        var response = HTTPResponse.json(stored.status, stored.body)
        response.headers.append((Self.replayedHeader, "true"))
        return response
    }
}
