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
    /// the entitlements, hands what it did to the claim's judge and writes the judge's audit record
    /// and answer, all in one atomic step, and answers with its outcome. If any purchase belongs to
    /// another account nothing is written and `TRANSACTION_BOUND_TO_OTHER_ACCOUNT` is thrown; a
    /// judge's refusal is thrown the same way, with nothing written.
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
    /// Decides the call's answer and its one audit record from what the claim did, inside the
    /// claim's transaction (see `ClaimJudge`). nil: the claim answers with its outcome alone and
    /// audits nothing (tools, tests).
    public var judge: (any ClaimJudge)?
    /// The call's `Idempotency-Key`: the judge's body is stored under it in the claim's transaction
    /// (a key answered first by another call is `IdempotentWrite.answeredElsewhere`, and nothing of
    /// this claim is written).
    public var idempotency: IdempotentWrite?
    /// The transactions to queue for Finish Transaction, in the claim's own transaction, if this
    /// claim grants them for the first time (see `FinishLedger`). Which ones is the caller's
    /// decision (the app's `finishTransactions`, never a refunded or revoked purchase); the ledger
    /// only leaves out local-test ones, which no App Store can be told of.
    public var finishIfNewlyGranted: Set<String> = []
    /// Ownership keys bound to the account without a transaction of their own: what the app's own
    /// purchase grants (grandfathering), one key per product, so one app purchase serves one account.
    public var appPurchaseKeys: [String] = []

    public init(bundleId: String, account: String, transactions: [CanonicalTransaction],
                entitlements: [Entitlement], now: Int64, factTimes: [String: Int64] = [:]) {
        self.factTimes = factTimes
        self.bundleId = bundleId
        self.account = account
        self.transactions = transactions
        self.entitlements = entitlements
        self.now = now
    }

    /// When Apple stated the facts of `chain` (`factTimes`, else `now`).
    public func factTime(of chain: String) -> Int64 { factTimes[chain] ?? now }
}

/// What a claim did, as it reads it back inside its transaction: which transactions it granted for
/// the first time (each transactionId is granted once: the gateway delivers consumables and other
/// one-off effects only for `newlyGranted`), which it had granted before, the stored entitlements,
/// and which chains a fact newer than the claim's decides. The ledger reports; it judges nothing.
public struct ClaimOutcome: Hashable, Sendable {
    public var newlyGranted: [String]
    public var alreadyGranted: [String]
    /// The account's stored entitlements of the claimed chains right after the claim (a newer
    /// notification's facts included), ordered by original transaction id.
    public var entitlements: [Entitlement] = []
    /// The stored lifecycle state of each claimed chain whose facts Apple stated after the claim's
    /// (`factTimes`: a notification signed after a device-signed transaction), by original
    /// transaction id: those facts, not the claim's, decide the chain's stored entitlement.
    public var newerFacts: [String: Entitlement.State] = [:]
    /// What the claim's judge answered (nil without one).
    public var answer: ClaimAnswer?
}

/// The caller's decision about a claim, made inside the claim's transaction from its outcome: the
/// answer's body (stored under the claim's `idempotency` key in that transaction, so a retry is
/// answered the same) and the attempt's one audit record (a grant is never stored without it).
/// A judge that throws refuses the claim: nothing of it is written.
public protocol ClaimJudge: Sendable {
    func judge(_ outcome: ClaimOutcome) throws(VerificationError) -> ClaimAnswer
}

/// A claim's answer, decided once inside the claim from what it stored.
public struct ClaimAnswer: Hashable, Sendable {
    /// The attempt's audit record, with the verdict the body states.
    public var audit: AuditRecord
    /// The answer's body (JSON text).
    public var body: String

    public init(audit: AuditRecord, body: String) {
        self.audit = audit
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
