import Foundation
import IAPCore
import Synchronization

/// Verifies and decodes data Apple signs as compact JWS (transactions, renewal info, notifications,
/// app transactions) against pinned roots. Named after Apple's library; stricter than it: inner
/// notification JWS are verified too, Xcode/LocalTesting data is never exempt from the chain and
/// signature, and a bad signature is always `INVALID_SIGNATURE`.
///
/// ECDSA signatures are malleable: for a valid (r, s), (r, n − s) verifies too, and this verifier
/// accepts both (high-S included) because Apple does not normalise S, so refusing either would
/// refuse genuine data. A second, different JWS string can therefore carry the same signed
/// payload: deduplicate and replay-protect on payload ids (`notificationUUID`, `transactionId`,
/// `originalTransactionId`), never on the JWS bytes or a hash of them.
///
/// Synchronous on purpose: offline verification is pure CPU (no suspension point on the hot path);
/// only `enableOnlineChecks` does I/O, through `OCSPTransport`, awaited by `verifying` around the
/// synchronous calls (a synchronous caller with online checks on is refused REVOCATION_CHECK_UNAVAILABLE).
public final class SignedDataVerifier: Sendable {
    /// `limits.maxJWSBytes`'s default; also the bound on a JWS header's JSON.
    public static let defaultMaxInputBytes = 64 * 1024
    /// Verified signatures remembered per cached chain (`VerifiedSignatureMemo`: the bound and why).
    public static let defaultSignatureMemoCapacity = 128

    /// What every payload must state (`AppIdentity.check`, the one rule for bundle id, app id and
    /// environment): given at construction, as Apple's verifier is given bundle id, app id and environment.
    public let identity: AppIdentity
    public let enableOnlineChecks: Bool
    public let clockSkewMs: Int64
    /// How long an OCSP "good" answer is trusted for a cached chain (online checks only).
    public let revocationRecheckSeconds: Int64
    /// A longer compact JWS (any kind, outer or inner) is refused INPUT_TOO_LARGE before it is read.
    public let maxInputBytes: Int

    let policy: PinnedChainPolicy
    let cache: VerifiedChainCache<VerifiedChain>
    /// Intermediates of chains this verifier verified, by exact DER (see `knownCertificate`).
    let verifiedIntermediates = VerifiedChainCache<X509Certificate>(capacity: 16)
    /// Pairs each new chain entry's `VerifiedSignatureMemo` holds at most (0: every signature verified).
    let signatureMemoCapacity: Int
    let signatureMemoHitCount = Atomic<Int>(0)
    let revocation: OCSPRevocationCheck
    let now: @Sendable () -> Date

    /// Xcode and LocalTesting in `environments` count only with `allowLocalTestEnvironments`.
    public convenience init(rootCertificates: [Data], bundleId: String, appAppleId: Int64?,
                            environments: Set<AppStoreEnvironment>, enableOnlineChecks: Bool = false,
                            allowLocalTestEnvironments: Bool = false, clockSkewMs: Int64 = 60_000,
                            now: @escaping @Sendable () -> Date = { Date() }, cacheCapacity: Int = 64,
                            ocspTransport: any OCSPTransport = UpstreamOCSPTransport(),
                            revocationRecheckSeconds: Int64 = 300,
                            maxInputBytes: Int = SignedDataVerifier.defaultMaxInputBytes,
                            signatureMemoCapacity: Int = SignedDataVerifier.defaultSignatureMemoCapacity) throws(VerificationError) {
        let identity = AppIdentity(bundleId: bundleId, appAppleId: appAppleId,
                                   environments: environments.filter { !$0.isLocalTest || allowLocalTestEnvironments })
        try self.init(rootCertificates: rootCertificates, identity: identity, enableOnlineChecks: enableOnlineChecks,
                      clockSkewMs: clockSkewMs, now: now, cacheCapacity: cacheCapacity, ocspTransport: ocspTransport,
                      revocationRecheckSeconds: revocationRecheckSeconds, maxInputBytes: maxInputBytes,
                      signatureMemoCapacity: signatureMemoCapacity)
    }

    public init(rootCertificates: [Data], identity: AppIdentity, enableOnlineChecks: Bool = false, clockSkewMs: Int64 = 60_000,
                now: @escaping @Sendable () -> Date = { Date() }, cacheCapacity: Int = 64,
                ocspTransport: any OCSPTransport = UpstreamOCSPTransport(),
                revocationRecheckSeconds: Int64 = 300,
                maxInputBytes: Int = SignedDataVerifier.defaultMaxInputBytes,
                signatureMemoCapacity: Int = SignedDataVerifier.defaultSignatureMemoCapacity) throws(VerificationError) {
        guard !rootCertificates.isEmpty else { throw VerificationError(.invalidConfiguration, "no root certificate pinned") }
        self.policy = try PinnedChainPolicy(rootCertificates: rootCertificates)
        self.identity = identity
        self.enableOnlineChecks = enableOnlineChecks
        // Bounded so `now + skew` cannot overflow whatever the configuration says.
        self.clockSkewMs = min(max(0, clockSkewMs), PayloadDates.maxMs)
        self.now = now
        self.cache = VerifiedChainCache(capacity: cacheCapacity)
        self.revocation = OCSPRevocationCheck(transport: ocspTransport, pinned: policy)
        self.revocationRecheckSeconds = min(max(0, revocationRecheckSeconds), PayloadDates.maxMs / 1000)
        self.maxInputBytes = max(0, maxInputBytes)
        self.signatureMemoCapacity = max(0, signatureMemoCapacity)
    }

    /// Chain cache counters (metrics).
    public var chainCacheHits: Int { cache.hits }
    public var chainCacheMisses: Int { cache.misses }
    /// Signatures accepted from the memo of verified signatures rather than verified again.
    public var signatureMemoHits: Int { signatureMemoHitCount.load(ordering: .relaxed) }

    public func verifyAndDecodeTransaction(_ jws: String) throws(VerificationError) -> JWSTransactionDecodedPayload {
        let (t, stated) = try verified(jws, as: .transaction, JWSTransactionDecodedPayload.init)
        try identity.check(stated)
        return t
    }

    /// Apple's renewal info carries no bundleId or appAppleId, so standalone renewal info proves
    /// only that Apple signed it for *some* app: bind it to a verified transaction of this app
    /// (same `originalTransactionId`) before acting on it. Either field, if present, is enforced.
    public func verifyAndDecodeRenewalInfo(_ jws: String) throws(VerificationError) -> JWSRenewalInfoDecodedPayload {
        let (r, stated) = try verified(jws, as: .renewalInfo, JWSRenewalInfoDecodedPayload.init)
        try identity.check(stated)
        return r
    }

    public func verifyAndDecodeAppTransaction(_ jws: String) throws(VerificationError) -> AppTransaction {
        let (a, stated) = try verified(jws, as: .appTransaction, AppTransaction.init)
        try identity.check(stated)
        return a
    }

    /// One signed payload of `kind`, standalone or inside a notification: verified, recognised as
    /// that kind, decoded, with the identity it states (typed strictly), for `identity.check`.
    func verified<T>(_ jws: String, as kind: PayloadKind, _ decode: (JSONValue) throws(VerificationError) -> T)
        throws(VerificationError) -> (T, EvidenceIdentity) {
        let date = kind == .appTransaction ? "receiptCreationDate" : "signedDate"
        let payload = try verifiedPayload(jws, dateField: date, expected: kind)
        try requireKind(payload, kind)
        let decoded = try decode(payload)
        return (decoded, try Self.statedIdentity(payload, kind))
    }

    /// `bundleId`, `appAppleId` and `environment` as any verified payload states them (typed
    /// strictly), whether or not its kind's model names them: what Apple signed for another app is
    /// refused, always. (A notification states them in its envelope: `envelopeIdentity`.)
    static func statedIdentity(_ payload: JSONValue, _ kind: PayloadKind) throws(VerificationError) -> EvidenceIdentity {
        let f = try JSONFields(payload, context: "payload")
        let environmentField = kind == .appTransaction ? "receiptType" : "environment"
        return EvidenceIdentity(bundleId: try f.string("bundleId"), appAppleId: try f.int64("appAppleId"),
                                environment: try f.open(environmentField, as: AppStoreEnvironment.self), kind: kind.statements)
    }

    enum PayloadKind: String {
        case transaction, renewalInfo = "renewal info", notification, appTransaction = "app transaction"
        case realtimeRequest = "realtime request"

        /// What a payload of this kind always states (`AppIdentity.check` refuses one that does not).
        var statements: EvidenceIdentity.Kind {
            switch self {
            case .transaction: .transaction
            case .renewalInfo: .renewalInfo
            case .notification: .notification
            case .appTransaction: .appTransaction
            case .realtimeRequest: .realtimeRequest
            }
        }
    }

    /// Recognises what a verified payload is by its required fields, so one kind of signed data
    /// cannot be replayed where another is expected.
    static func kind(of payload: JSONValue) -> PayloadKind? {
        guard let o = payload.objectValue else { return nil }
        if o["notificationType"] != nil { return .notification }
        if o["transactionId"] != nil { return .transaction }
        if o["receiptType"] != nil && o["receiptCreationDate"] != nil { return .appTransaction }
        if o["requestIdentifier"] != nil && o["userLocale"] != nil && o["originalTransactionId"] != nil { return .realtimeRequest }
        if o["originalTransactionId"] != nil && o["autoRenewStatus"] != nil { return .renewalInfo }
        return nil
    }

    func requireKind(_ payload: JSONValue, _ expected: PayloadKind) throws(VerificationError) {
        let found = Self.kind(of: payload)
        guard found == expected else {
            throw VerificationError(.wrongPayloadKind, "expected a \(expected.rawValue), found \(found?.rawValue ?? "an unknown payload")")
        }
    }
}
