/// The one error type every layer of IAPGateway throws when it refuses something.
///
/// `code` is stable and documented (README, "Error codes"): clients and scripts match on it.
/// `message` is for humans; it never contains a secret (shared secret, `.p8` key, API key).
public struct VerificationError: Error, Equatable, Sendable, CustomStringConvertible {
    public let code: Code
    public let message: String
    /// How long the upstream asked us to wait (HTTP 429/503 Retry-After), when that is why we refused:
    /// the gateway answers 503 with the same `Retry-After`. nil for every other refusal.
    public let retryAfterSeconds: Int?

    public init(_ code: Code, _ message: String, retryAfterSeconds: Int? = nil) {
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
    }

    /// Whether trying the same thing again later may succeed (an unreachable OCSP responder,
    /// Apple being unavailable). Refusals on the evidence itself are never retryable.
    public var retryable: Bool { code.retryable }

    public var description: String { "\(code.rawValue): \(message)" }

    public struct Code: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public var retryable: Bool { Self.retryableCodes.contains(self) }
        static let retryableCodes: Set<Code> = [.revocationCheckUnavailable, .upstreamUnavailable, .rateLimited,
                                                  .storageUnavailable, .storageOutcomeUnknown, .idempotencyKeyInFlight]

        // MARK: Input shape (any parser of outside input)
        /// Input larger than the limit for its kind, or a receipt that needs more Server API work than
        /// allowed (more purchase chains than `maxReceiptLookups`, or a purchase history longer than
        /// `maxPages` pages, which is refused rather than judged on part of it).
        public static let inputTooLarge = Code(rawValue: "INPUT_TOO_LARGE")
        /// Base64 or base64url that is not canonical (bad alphabet, padding, stray bits).
        public static let malformedBase64 = Code(rawValue: "MALFORMED_BASE64")
        /// A compact JWS that is not exactly three non-empty segments.
        public static let malformedJWS = Code(rawValue: "MALFORMED_JWS")
        /// JSON that does not parse (or nests too deeply).
        public static let malformedJSON = Code(rawValue: "MALFORMED_JSON")
        /// A JSON object with the same key twice: refused, never "last one wins".
        public static let duplicateJSONKey = Code(rawValue: "DUPLICATE_JSON_KEY")
        /// A known field with the wrong JSON type (a date or price sent as a string).
        public static let invalidFieldType = Code(rawValue: "INVALID_FIELD_TYPE")
        /// A field the payload kind requires is absent.
        public static let missingField = Code(rawValue: "MISSING_FIELD")

        // MARK: JWS header and certificate chain
        /// `alg` other than ES256 (none, HS256, ES384, ...).
        public static let unsupportedAlgorithm = Code(rawValue: "UNSUPPORTED_ALGORITHM")
        /// `x5c` missing or not exactly three certificates.
        public static let invalidChainLength = Code(rawValue: "INVALID_CHAIN_LENGTH")
        /// A certificate that does not parse as X.509 DER.
        public static let malformedCertificate = Code(rawValue: "MALFORMED_CERTIFICATE")
        /// The chain does not end in a pinned root (or `x5c[2]` is not one).
        public static let untrustedRoot = Code(rawValue: "UNTRUSTED_ROOT")
        /// The chain does not verify (a signature in it, a constraint, a purpose), or the JWS
        /// intermediate's key is not on P-384 or P-256 by name.
        public static let invalidCertificateChain = Code(rawValue: "INVALID_CERTIFICATE_CHAIN")
        /// The intermediate or leaf lacks Apple's marker OID.
        public static let missingAppleOID = Code(rawValue: "MISSING_APPLE_OID")
        /// A certificate was expired at the time that matters.
        public static let certificateExpired = Code(rawValue: "CERTIFICATE_EXPIRED")
        /// A certificate was not yet valid at the time that matters.
        public static let certificateNotYetValid = Code(rawValue: "CERTIFICATE_NOT_YET_VALID")
        /// `signedDate` later than now plus the allowed clock skew.
        public static let signedDateInFuture = Code(rawValue: "SIGNED_DATE_IN_FUTURE")
        /// A Retention Messaging realtime request's `signedDate` earlier than now minus the allowed
        /// clock skew: Apple signs one as it asks and waits well under a second, so an older one is a replay.
        public static let signedDateTooOld = Code(rawValue: "SIGNED_DATE_TOO_OLD")
        /// A signed payload's `exp` claim is at or before now (Apple never sends one; Apple's Python library refuses it).
        public static let jwtExpired = Code(rawValue: "JWT_EXPIRED")
        /// A signed payload's `nbf` or `iat` claim is later than now (refused as Apple's Python library does).
        public static let jwtNotYetValid = Code(rawValue: "JWT_NOT_YET_VALID")
        /// A signed payload names an audience (`aud`): Apple's signed data never does, and nobody here expects one.
        public static let jwtAudienceNotAccepted = Code(rawValue: "JWT_AUDIENCE_NOT_ACCEPTED")
        /// The ES256 (or PKCS#7) signature does not verify (a receipt's digest other than
        /// SHA-256/SHA-1 included), or the JWS leaf key is not on P-256 by name (secp256k1,
        /// brainpoolP256r1, ...: ES256 allows only P-256).
        public static let invalidSignature = Code(rawValue: "INVALID_SIGNATURE")
        /// The OCSP responder says a certificate in the chain is revoked.
        public static let certificateRevoked = Code(rawValue: "CERTIFICATE_REVOKED")
        /// Online checks were required and the responder could not be reached: try again later.
        public static let revocationCheckUnavailable = Code(rawValue: "REVOCATION_CHECK_UNAVAILABLE")

        // MARK: Identity and policy, after the signature
        /// Verified data (a JWS payload, a receipt, Apple's verifyReceipt answer, a notification) is
        /// about another app than the route's: its bundle id differs from the app's, or it names none
        /// where its kind always names one (One identity rule).
        public static let bundleIdMismatch = Code(rawValue: "BUNDLE_ID_MISMATCH")
        /// Verified data names another app Apple id than the app's policy, or none from Production
        /// where its kind always names one (a receipt, an app transaction, a notification); a
        /// retention request for an app without `appAppleId`.
        public static let appAppleIdMismatch = Code(rawValue: "APP_APPLE_ID_MISMATCH")
        /// The evidence's environment (Production, Sandbox) is not one the app's policy allows for
        /// this account, or the verified payloads of one piece of evidence disagree on it.
        public static let environmentNotAllowed = Code(rawValue: "ENVIRONMENT_NOT_ALLOWED")
        /// The payload is of another kind than asked for (a transaction is not renewal info).
        public static let wrongPayloadKind = Code(rawValue: "WRONG_PAYLOAD_KIND")
        /// A notification whose `data` and `summary` (or inner and outer JWS) disagree.
        public static let notificationInconsistent = Code(rawValue: "NOTIFICATION_INCONSISTENT")
        /// Xcode / LocalTesting data where the app's policy does not enable it.
        public static let testEnvironmentNotAllowed = Code(rawValue: "TEST_ENVIRONMENT_NOT_ALLOWED")

        // MARK: Legacy receipts
        /// Not a PKCS#7 SignedData receipt, or its payload does not parse (verifyReceipt 21002).
        public static let malformedReceipt = Code(rawValue: "MALFORMED_RECEIPT")
        /// A receipt that is not an App Store receipt (Xcode, self-signed).
        public static let notAppStoreReceipt = Code(rawValue: "NOT_APP_STORE_RECEIPT")

        // MARK: Configuration and mapping files
        /// A configuration file, trust root or secret the gateway cannot use (named with its file
        /// and line where it has one); in an answer, a 500 with one plain sentence.
        public static let invalidConfiguration = Code(rawValue: "INVALID_CONFIGURATION")
        /// A mapping file (`Mappings/<source>/vN`) that does not load, or a mapping the gateway
        /// needs that is missing.
        public static let invalidMapping = Code(rawValue: "INVALID_MAPPING")

        // MARK: Upstream
        /// Apple (or the configured upstream) cannot answer now: try again later.
        public static let upstreamUnavailable = Code(rawValue: "UPSTREAM_UNAVAILABLE")

        /// Apple (or the upstream) answered, but not in a shape the gateway can use (not the JSON
        /// Apple documents, a member of the wrong type or missing): the fault is upstream's, not the
        /// client's evidence. Not retryable: the same question is likely to get the same answer.
        public static let upstreamInvalidResponse = Code(rawValue: "UPSTREAM_INVALID_RESPONSE")
        /// Apple (or the upstream) asked us to slow down (HTTP 429), and its `Retry-After` does not fit the
        /// request's budget or retries ran out; the 503 carries Apple's `Retry-After`.
        public static let rateLimited = Code(rawValue: "RATE_LIMITED")
        /// Apple refused our credentials (verifyReceipt 21004 shared secret, Server API 401 key):
        /// an operator must fix the app's configuration; the log line names the key id or the secret's
        /// reference, never the key or secret, and the client gets a plain message.
        public static let upstreamCredentialsRejected = Code(rawValue: "UPSTREAM_CREDENTIALS_REJECTED")
        /// verifyReceipt could not authenticate the receipt (21003). Its 21002 (malformed receipt-data)
        /// is MALFORMED_RECEIPT, the code local receipt parsing uses for the same fault.
        public static let receiptNotAuthentic = Code(rawValue: "RECEIPT_NOT_AUTHENTIC")
        /// The App Store knows no such transaction or account (Server API 4040010, verifyReceipt 21010).
        public static let transactionNotFound = Code(rawValue: "TRANSACTION_NOT_FOUND")
        /// The App Store knows no order with this order ID for the app (Look Up Order ID answered
        /// status 1, invalid, in every environment the app allows): 404.
        public static let orderNotFound = Code(rawValue: "ORDER_NOT_FOUND")

        // MARK: Gateway requests and ownership
        /// The request is not what the route accepts (a body that is not strict JSON — malformed, a duplicate
        /// key —, a member missing, unknown or of the wrong type, a Content-Type other than `application/json`,
        /// two body lengths). The JSON codes above are for the content of evidence, answered 422.
        public static let malformedRequest = Code(rawValue: "MALFORMED_REQUEST")
        /// No or a wrong API key.
        public static let unauthenticated = Code(rawValue: "UNAUTHENTICATED")
        /// No configuration for this bundle id.
        public static let unknownApp = Code(rawValue: "UNKNOWN_APP")
        /// No such route.
        public static let notFound = Code(rawValue: "NOT_FOUND")
        /// The route exists but not for this method; the `Allow` header names the one it takes.
        public static let methodNotAllowed = Code(rawValue: "METHOD_NOT_ALLOWED")
        /// The purchase is already bound to another account of this app.
        public static let transactionBoundToOtherAccount = Code(rawValue: "TRANSACTION_BOUND_TO_OTHER_ACCOUNT")
        /// A nonce that was never issued, was issued for another app or account, or expired.
        public static let nonceInvalid = Code(rawValue: "NONCE_INVALID")
        /// A nonce that was already used once.
        public static let nonceReused = Code(rawValue: "NONCE_REUSED")
        /// The app's policy requires a nonce for this evidence and none was sent.
        public static let nonceRequired = Code(rawValue: "NONCE_REQUIRED")
        /// The transaction's appAccountToken does not belong to the claiming account.
        public static let appAccountTokenMismatch = Code(rawValue: "APP_ACCOUNT_TOKEN_MISMATCH")
        /// The product is not in the app's catalog.
        public static let unknownProduct = Code(rawValue: "UNKNOWN_PRODUCT")
        /// The product's type differs from the catalog's.
        public static let productTypeMismatch = Code(rawValue: "PRODUCT_TYPE_MISMATCH")
        /// The price or currency differs from the catalog's.
        public static let priceMismatch = Code(rawValue: "PRICE_MISMATCH")
        /// The presented transaction (transaction id, signed transaction), or every purchase of a receipt,
        /// was refunded or revoked: it grants nothing.
        public static let transactionRevoked = Code(rawValue: "TRANSACTION_REVOKED")
        /// A family-shared purchase where the app's policy does not accept family sharing.
        public static let familySharingNotAllowed = Code(rawValue: "FAMILY_SHARING_NOT_ALLOWED")
        /// The evidence carries no purchase at all.
        public static let noTransactions = Code(rawValue: "NO_TRANSACTIONS")
        /// The app's policy does not let this account have this offer signed: an offer or product it
        /// does not list, an account outside the offer's audience, or no key to sign with (403).
        public static let offerNotAllowed = Code(rawValue: "OFFER_NOT_ALLOWED")
        /// The gateway's own storage failed or did not answer within its deadline: nothing of the
        /// request was committed, and nothing of it will commit later.
        public static let storageUnavailable = Code(rawValue: "STORAGE_UNAVAILABLE")
        /// The storage was sent the COMMIT of the request's work and did not confirm it in time (the
        /// connection lost, or no answer within the request's budget): it may or may not have taken
        /// effect. A retry with the same `Idempotency-Key` answers what happened.
        public static let storageOutcomeUnknown = Code(rawValue: "STORAGE_OUTCOME_UNKNOWN")
        /// An `Idempotency-Key` sent again with another request (another body or route) than the one
        /// it first answered (422).
        public static let idempotencyKeyReused = Code(rawValue: "IDEMPOTENCY_KEY_REUSED")
        /// A request with an `Idempotency-Key` whose first request is still being answered (409):
        /// try again after `Retry-After`.
        public static let idempotencyKeyInFlight = Code(rawValue: "IDEMPOTENCY_KEY_IN_FLIGHT")
        /// The app's receipt routing is not a `rollout`: it has no rollout to show or move (404).
        public static let rolloutNotConfigured = Code(rawValue: "ROLLOUT_NOT_CONFIGURED")
        /// A rollout change that cannot be made now: another change came first, the step's guard
        /// does not hold, or there is no step to move to (409).
        public static let rolloutConflict = Code(rawValue: "ROLLOUT_CONFLICT")
        /// The gateway broke one of its own invariants (a bug, or a stored row that no longer matches
        /// the schema): nothing was granted, and trying again will not help until an operator looks.
        public static let internalError = Code(rawValue: "INTERNAL_ERROR")

        /// Every code above, for documentation and for tests that check the list is complete.
        public static let all: [Code] = [
            .inputTooLarge, .malformedBase64, .malformedJWS, .malformedJSON, .duplicateJSONKey,
            .invalidFieldType, .missingField, .unsupportedAlgorithm, .invalidChainLength,
            .malformedCertificate, .untrustedRoot, .invalidCertificateChain, .missingAppleOID,
            .certificateExpired, .certificateNotYetValid, .signedDateInFuture, .signedDateTooOld, .jwtExpired, .jwtNotYetValid,
            .jwtAudienceNotAccepted, .invalidSignature,
            .certificateRevoked, .revocationCheckUnavailable, .bundleIdMismatch, .appAppleIdMismatch,
            .environmentNotAllowed, .wrongPayloadKind, .notificationInconsistent,
            .testEnvironmentNotAllowed, .malformedReceipt, .notAppStoreReceipt,
            .invalidConfiguration, .invalidMapping, .upstreamUnavailable, .upstreamInvalidResponse, .rateLimited,
            .upstreamCredentialsRejected, .receiptNotAuthentic, .transactionNotFound, .orderNotFound, .malformedRequest,
            .unauthenticated, .unknownApp, .notFound, .methodNotAllowed, .transactionBoundToOtherAccount, .nonceInvalid,
            .nonceReused, .nonceRequired, .appAccountTokenMismatch, .unknownProduct, .productTypeMismatch,
            .priceMismatch, .transactionRevoked, .familySharingNotAllowed, .noTransactions, .offerNotAllowed, .storageUnavailable,
            .storageOutcomeUnknown, .idempotencyKeyReused, .idempotencyKeyInFlight, .rolloutNotConfigured, .rolloutConflict,
            .internalError,
        ]
    }
}
