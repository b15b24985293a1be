import Foundation
import IAPCore

/// Durable state the gateway keeps AFTER an adapter has verified evidence: single-use nonces,
/// the binding of each purchase to one account, the once-only grant of each transaction,
/// entitlements, sealed latest receipts and the audit trail.
///
/// This is the seam between the gateway and its storage engine (SQLite today, PostgreSQL for
/// several instances): it speaks only the canonical model and plain values, never SQL types.
/// The calls are async: the gateway's implementation (`AsyncSQLLedger`) runs each on a storage
/// thread with a deadline, never on Swift's cooperative pool; `SQLLedger` has the same calls,
/// synchronous, for tests and tools (it does not conform, so it cannot be handed to the gateway).
/// Every implementation must give the same guarantees:
/// - `consumeNonce` succeeds at most once per nonce, across all connections and processes;
/// - `claim` is all-or-nothing, and an ownership key is bound to exactly one account forever;
/// - storage failures surface as `STORAGE_UNAVAILABLE` and their messages carry no data values.
public protocol Ledger: Sendable {
    /// Issues a fresh single-use nonce for one account of one app, valid for `ttlSeconds` after `now`
    /// (1 second to 1 day; anything else is `INVALID_CONFIGURATION`).
    /// `keyed`: the call's `Idempotency-Key` and its answer, stored in the nonce's own transaction.
    func issueNonce(bundleId: String, account: String, ttlSeconds: Int, now: Int64,
                    keyed: (IdempotentWrite, @Sendable (IssuedNonce) -> String)?) async throws(VerificationError) -> IssuedNonce

    /// Uses up a nonce. Unknown, expired, or issued for another app or account: `NONCE_INVALID`;
    /// already used: `NONCE_REUSED`, unless by the keyed request `by` names
    /// (`IdempotentWrite.requestIdentity`) retrying itself.
    func consumeNonce(_ value: String, bundleId: String, account: String, now: Int64, by request: String?)
        async throws(VerificationError)

    /// The answer stored under an `Idempotency-Key` of the app, unless it expired by `now`.
    func idempotentAnswer(bundleId: String, key: String, now: Int64) async throws(VerificationError) -> StoredAnswer?

    /// Stores the answer of a keyed call that writes nothing else (an offer signature).
    func storeIdempotentAnswer(_ write: IdempotentWrite, bundleId: String, status: Int, body: String, now: Int64)
        async throws(VerificationError)

    /// Deletes the stored answers that expired by `now`; returns how many.
    func purgeIdempotentAnswers(expiredBy now: Int64) async throws(VerificationError) -> Int

    /// Binds every transaction's purchase to the claiming account, records the transactions, stores
    /// the entitlements and appends the claim's audit record, all in one atomic step, and answers
    /// with the account's stored entitlements of the claimed chains as of that step. If any purchase
    /// belongs to another account nothing is written and `TRANSACTION_BOUND_TO_OTHER_ACCOUNT` is
    /// thrown; if the presented transaction's chain was refunded or revoked by a fact newer than the
    /// claim's, `TRANSACTION_REVOKED`.
    func claim(_ claim: PurchaseClaim) async throws(VerificationError) -> ClaimOutcome

    /// The stored entitlements of one account of one app, ordered by original transaction id.
    func entitlements(bundleId: String, account: String) async throws(VerificationError) -> [Entitlement]

    /// The account a purchase is bound to, if any.
    func owner(bundleId: String, originalTransactionId: String) async throws(VerificationError) -> String?

    /// Every stored transaction of one purchase (its renewals too), oldest grant first.
    func transactions(bundleId: String, originalTransactionId: String) async throws(VerificationError) -> [CanonicalTransaction]

    /// Appends one audit record. The record holds a hash of the evidence, never the evidence.
    func recordAudit(_ record: AuditRecord) async throws(VerificationError)

    /// The newest `limit` audit records of one app, newest first.
    func auditRecords(bundleId: String, limit: Int) async throws(VerificationError) -> [AuditRecord]

    /// `subject`'s attempts at or after `since` (newest first, at most `limit`) and its purchase chains.
    func supportHistory(bundleId: String, subject: SupportSubject, since: Int64, limit: Int)
        async throws(VerificationError) -> SupportHistory

    /// Deletes audit records older than `cutoff` (ms since 1970); returns how many.
    func purgeAudit(olderThan cutoff: Int64) async throws(VerificationError) -> Int

    /// Stores the latest receipt of a purchase. The bytes are opaque to the ledger: the gateway
    /// seals (encrypts and authenticates) them before the call, so the ledger never holds a
    /// readable receipt and needs no key.
    func storeLatestReceipt(bundleId: String, originalTransactionId: String, sealedReceipt: Data) async throws(VerificationError)

    /// The sealed bytes last stored for a purchase, exactly as given.
    func latestReceipt(bundleId: String, originalTransactionId: String) async throws(VerificationError) -> Data?

    /// Proves the storage answers (readiness probe).
    func ping() async throws(VerificationError)
}

/// A nonce handed to a client, to be sent back with its purchase evidence.
public struct IssuedNonce: Hashable, Sendable {
    /// 128 random bits, base64url without padding (22 characters).
    public let value: String
    /// Milliseconds since 1970 after which the nonce is refused.
    public let expiresAt: Int64
}

/// What the gateway asks the ledger to record once an adapter has verified a purchase.
public struct PurchaseClaim: Sendable {
    public var bundleId: String
    public var account: String
    public var transactions: [CanonicalTransaction]
    /// Entitlements derived from the transactions; each must be for `account` and for a purchase
    /// this claim (or an earlier one) binds to `account`. One for a purchase of another account is
    /// `TRANSACTION_BOUND_TO_OTHER_ACCOUNT`; one for another account or an unbound purchase is a
    /// gateway bug and refused as `STORAGE_UNAVAILABLE`. Either way nothing of the claim is written.
    public var entitlements: [Entitlement]
    /// Milliseconds since 1970.
    public var now: Int64
    /// When Apple stated each chain's facts (by originalTransactionId): the newest `signedDate` of
    /// the evidence, or `now` for a live answer. A notification signed later wins over the claim.
    public var factTimes: [String: Int64]
    /// The transaction the client presented (nil: a receipt, which presents no single one). Its
    /// chain refunded or revoked by a fact newer than `factTimes` refuses the whole claim: an old
    /// signed transaction replayed after its refund grants nothing.
    public var presentedTransactionId: String?
    /// Appended to the audit trail inside the claim: a grant is never stored without its record.
    public var audit: AuditRecord?
    /// Builds the call's answer from the claim's outcome as the claim reads it back, inside the
    /// claim's transaction: its verdict is `audit`'s (the trail says what the answer says) and its
    /// body is stored under `idempotency` and returned as `ClaimOutcome.answer`. nil: `audit` is
    /// written with the verdict it has.
    public var answer: (@Sendable (ClaimOutcome) -> ClaimAnswer)?
    /// The call's `Idempotency-Key`: `answer`'s body is stored under it in the claim's transaction
    /// (a key answered first by another call is `IdempotentWrite.answeredElsewhere`, and nothing of
    /// this claim is written).
    public var idempotency: IdempotentWrite?
    /// Queue each newly granted, unrevoked transaction for Finish Transaction in the claim's own
    /// transaction (the app's `finishTransactions`; see `FinishLedger`).
    public var finishNewlyGranted = false
    /// Ownership keys bound to the account without a transaction of their own: what the app's own
    /// purchase grants (grandfathering), one key per product, so one app purchase serves one account.
    public var appPurchaseKeys: [String] = []

    public init(bundleId: String, account: String, transactions: [CanonicalTransaction],
                entitlements: [Entitlement], now: Int64, factTimes: [String: Int64] = [:],
                presentedTransactionId: String? = nil, audit: AuditRecord? = nil) {
        self.factTimes = factTimes
        self.presentedTransactionId = presentedTransactionId
        self.audit = audit
        self.bundleId = bundleId
        self.account = account
        self.transactions = transactions
        self.entitlements = entitlements
        self.now = now
    }
}

/// Which transactions a claim granted for the first time. Each transactionId is granted once:
/// the gateway delivers consumables and other one-off effects only for `newlyGranted`.
public struct ClaimOutcome: Hashable, Sendable {
    public var newlyGranted: [String]
    public var alreadyGranted: [String]
    /// The account's stored entitlements of the claimed chains right after the claim (a newer
    /// notification's facts included), ordered by original transaction id.
    public var entitlements: [Entitlement] = []
    /// The body `PurchaseClaim.answer` built (nil without one).
    public var answer: String?
}

/// A claim's answer, decided once inside the claim from what it stored.
public struct ClaimAnswer: Sendable {
    public var verdict: AuditVerdict
    /// The answer's body (JSON text).
    public var body: String

    public init(verdict: AuditVerdict, body: String) {
        self.verdict = verdict
        self.body = body
    }
}

/// What an audited request was answered (the audit_log `verdict` column).
public enum AuditVerdict: String, Codable, Hashable, Sendable, CaseIterable {
    /// Answered 200: a verify answer's `granted` (something grants access now), or a retention answer.
    case granted
    /// Answered 200 with verdict `notGranted`: genuine and bound to the account, nothing grants access now.
    case notGranted
    /// Refused: `errorCode` says why.
    case refused
}

/// One line of the audit trail: what was decided about which evidence, never the evidence itself.
public struct AuditRecord: Hashable, Sendable {
    /// Milliseconds since 1970.
    public var time: Int64
    public var bundleId: String
    public var account: String?
    /// "appReceipt", "transactionId", "signedTransaction", "notification", ...
    public var evidenceKind: String
    /// Lowercase hex SHA-256 of the evidence as received (64 characters); anything else is refused.
    public var evidenceSHA256: String
    public var transactionIds: [String]
    public var productIds: [String]
    public var environment: String?
    public var verdict: AuditVerdict
    public var errorCode: VerificationError.Code?
    /// The adapter that verified the evidence ("verifyReceipt", "serverAPI").
    public var adapter: String?
    public var latencyMicros: Int64
    /// The `X-Request-Id` the client was answered with (nil: recorded before the ledger kept it).
    public var requestId: String?
    /// The app backend's `X-Client-Version`, bounded and sanitised (`AuditRecord.clientVersion(_:)`).
    public var clientVersion: String?
    /// What Apple answered (`AppleAnswerNote.summary`); nil: Apple was not asked.
    public var appleStatus: String?

    public init(time: Int64, bundleId: String, account: String?, evidenceKind: String, evidenceSHA256: String,
                transactionIds: [String], productIds: [String], environment: String?, verdict: AuditVerdict,
                errorCode: VerificationError.Code?, adapter: String?, latencyMicros: Int64,
                requestId: String? = nil, clientVersion: String? = nil, appleStatus: String? = nil) {
        self.requestId = requestId
        self.clientVersion = clientVersion
        self.appleStatus = appleStatus
        self.time = time
        self.bundleId = bundleId
        self.account = account
        self.evidenceKind = evidenceKind
        self.evidenceSHA256 = evidenceSHA256
        self.transactionIds = transactionIds
        self.productIds = productIds
        self.environment = environment
        self.verdict = verdict
        self.errorCode = errorCode
        self.adapter = adapter
        self.latencyMicros = latencyMicros
    }
}

extension AuditRecord {
    /// The longest `X-Client-Version` kept; a longer one is cut.
    public static let clientVersionLimit = 64

    /// The header as the audit keeps it: a `ClientExcerpt` of at most `clientVersionLimit`
    /// characters, nil when absent or empty. It is the client's word, shown to support as such,
    /// never acted on.
    public static func clientVersion(_ header: String?) -> String? {
        guard let header, !header.isEmpty else { return nil }
        return ClientExcerpt.of(header, limit: clientVersionLimit)
    }
}
