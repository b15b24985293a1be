import Adapters
import AppleTrust
import Foundation
import IAPConfig
import IAPCore
import IAPMapping

/// A notification from Apple, verified and normalised, ready for the durable inbox.
public struct DecodedNotification: Sendable, Equatable {
    /// `notificationUUID` (V2) or "v1:" + SHA-256 of the body (V1 has no id of its own).
    public var id: String
    public var version: String
    public var notificationType: NotificationType
    public var subtype: NotificationSubtype?
    public var signedDate: Int64
    public var environment: AppStoreEnvironment
    /// nil for notifications that name no purchase chain (TEST, RENEWAL_EXTENSION SUMMARY, …),
    /// and for V1 until Apple has confirmed its receipt (`v1LatestReceipt`).
    public var event: LifecycleEvent?
    /// V1 only: the receipt to re-verify through verifyReceipt. A V1 body is signed by nothing, so
    /// it is only a trigger: the facts applied are Apple's answer about this receipt.
    public var v1LatestReceipt: String?
    /// The body as kept in the inbox: V2 as received; V1 without its password and receipt.
    public var storedBody: [UInt8]
}

/// Turns a `POST /v1/notifications/{bundleId}` body into a `DecodedNotification`, trusting only
/// signatures: V2 bodies have their outer JWS and every inner JWS verified against the app's pinned
/// roots (they must agree on bundle and environment); V1 bodies must carry the app's shared secret.
public final class NotificationDecoder: Sendable {
    /// The adapter that owns V2 notifications' evidence (found by capability); nil: V2 is refused.
    let signed: (any SignedNotificationDecoding)?
    let environment: [String: String]
    /// The per-app JWS verifiers (`limits.maxJWSBytes` for the outer JWS and every inner one),
    /// shared with the Server API adapter when the assembly builds both.
    public let verifiers: AppVerifiers

    public init(signed: (any SignedNotificationDecoding)?, environment: [String: String],
                verifiers: AppVerifiers = AppVerifiers()) {
        self.signed = signed
        self.environment = environment
        self.verifiers = verifiers
    }

    /// `decode` from async code, the OCSP answers of an app with online checks awaited around it
    /// (`SignedDataVerifier.withOnlineChecks`); the synchronous `decode` refuses those.
    public func decodeCheckingOnline(body: [UInt8], app: AppPolicy) async throws(VerificationError) -> DecodedNotification {
        try await SignedDataVerifier.withOnlineChecks(when: app.onlineChecks) { () throws(VerificationError) in
            try self.decode(body: body, app: app)
        }
    }

    public func decode(body: [UInt8], app: AppPolicy) throws(VerificationError) -> DecodedNotification {
        if let jws = Self.canonicalV2(body) { return try decodeV2(jws, storedBody: body, app: app) }
        let json = try RequestBody.parse(body, maxDepth: 16)
        guard case .object(let object) = json else {
            throw VerificationError(.malformedRequest, "a notification body is a JSON object")
        }
        if let signed = object["signedPayload"] {
            guard object.count == 1, case .string(let jws) = signed else {
                throw VerificationError(.malformedRequest, "a V2 notification body is {\"signedPayload\": \"…\"}")
            }
            return try decodeV2(jws, storedBody: Array((Self.v2Prefix + jws + Self.v2Suffix).utf8), app: app)
        }
        return try decodeV1(JSONFields(object, context: "notification"), body: body, app: app)
    }

    // MARK: V2

    static let v2Prefix = "{\"signedPayload\":\""
    static let v2Suffix = "\"}"

    /// The JWS of a body that is exactly `{"signedPayload":"<JWS>"}` (what Apple sends), the JWS only
    /// base64url and dots: such a body is the JSON the general path would parse, and already the form
    /// the inbox keeps, so neither the 17 KB parse nor the rebuilt copy is needed. Anything else: nil.
    static func canonicalV2(_ body: [UInt8]) -> String? {
        let prefix = v2Prefix.utf8, suffix = v2Suffix.utf8
        guard body.count > prefix.count + suffix.count, body.starts(with: prefix), body.suffix(suffix.count).elementsEqual(suffix)
        else { return nil }
        let jws = body[prefix.count..<(body.count - suffix.count)]
        guard jws.withUnsafeBufferPointer(areJWSBytes) else { return nil }
        return String(decoding: jws, as: UTF8.self)
    }

    /// Every byte base64url or a dot. Branch-free, with no early exit, so the compiler vectorises it:
    /// a byte-by-byte `switch` over the 17 KB body was 1.5–1.8% of an accepted notification's CPU.
    static func areJWSBytes(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var invalid: UInt8 = 0
        for b in bytes {
            // `b | 0x20` folds A–Z onto a–z (and nothing else onto them).
            let letter: UInt8 = (b | 0x20) &- UInt8(ascii: "a") < 26 ? 1 : 0
            let digit: UInt8 = b &- UInt8(ascii: "0") < 10 ? 1 : 0
            let mark: UInt8 = b == UInt8(ascii: "-") || b == UInt8(ascii: "_") || b == UInt8(ascii: ".") ? 1 : 0
            invalid |= (letter | digit | mark) ^ 1
        }
        return invalid == 0
    }

    /// `storedBody`: `{"signedPayload":"<jws>"}`, the canonical form of the body, kept in the inbox.
    private func decodeV2(_ jws: String, storedBody: [UInt8], app: AppPolicy) throws(VerificationError) -> DecodedNotification {
        guard let signed else {
            throw VerificationError(.invalidConfiguration, "no registered adapter decodes signed notifications")
        }
        let verified = try signed.decodeSignedNotification(jws, app: app)
        let payload = verified.payload
        guard let uuid = payload.notificationUUID, !uuid.isEmpty, uuid.utf8.count <= 64 else {
            throw VerificationError(.missingField, "notification.notificationUUID is required")
        }
        // Read and judged by the verifier (the app's identity for Apple's own messages): used as it is.
        guard let environment = payload.verifiedIdentity?.environment else {
            throw VerificationError(.missingField, "the notification names no environment")
        }
        let (transaction, renewal) = (verified.transaction, verified.renewal)
        let event = (transaction != nil || renewal != nil)
            ? LifecycleEvent(id: uuid, bundleId: app.bundleId, notificationType: payload.notificationType,
                             subtype: payload.subtype, signedDate: payload.signedDate, environment: environment,
                             transaction: transaction, renewal: renewal)
            : nil
        return DecodedNotification(id: uuid, version: "2", notificationType: payload.notificationType,
                                   subtype: payload.subtype, signedDate: payload.signedDate,
                                   environment: environment, event: event, storedBody: storedBody)
    }

    // MARK: V1 (apps not yet switched to V2)

    /// V1 `notification_type` → the V2 type and subtype the state machine understands.
    static let v1Types: [String: (NotificationType, NotificationSubtype?)] = [
        "INITIAL_BUY": (.subscribed, .initialBuy), "INTERACTIVE_RENEWAL": (.subscribed, .resubscribe),
        "DID_RENEW": (.didRenew, nil), "DID_RECOVER": (.didRenew, .billingRecovery),
        "RENEWAL": (.didRenew, .billingRecovery), "DID_FAIL_TO_RENEW": (.didFailToRenew, nil),
        "DID_CHANGE_RENEWAL_PREF": (.didChangeRenewalPref, nil), "DID_CHANGE_RENEWAL_STATUS": (.didChangeRenewalStatus, nil),
        "CANCEL": (.refund, nil), "REFUND": (.refund, nil), "REVOKE": (.revoke, nil),
        "PRICE_INCREASE_CONSENT": (.priceIncrease, nil), "CONSUMPTION_REQUEST": (.consumptionRequest, nil),
    ]

    private func decodeV1(_ fields: JSONFields, body: [UInt8], app: AppPolicy) throws(VerificationError) -> DecodedNotification {
        let password = try fields.requiredString("password")
        try checkSharedSecret(password, app: app)
        let bundleId = try fields.string("bid")
        // V1 names the sandbox "Sandbox" and production "PROD": its vocabulary, read here; whether
        // the app takes it is the identity rule's.
        let environmentText = try fields.requiredString("environment")
        let environment: AppStoreEnvironment = environmentText == "PROD" ? .production : AppStoreEnvironment(rawValue: environmentText)
        guard environment == .production || environment == .sandbox else {
            throw VerificationError(.invalidFieldType, "V1 notification environment \(ClientExcerpt.of(environmentText, limit: 32)) is neither PROD nor Sandbox")
        }
        try ClaimPolicy(app: app, claimant: .apple).admit(EvidenceIdentity(bundleId: bundleId, environment: environment,
                                                                            kind: .v1Notification))
        let v1Type = try fields.requiredString("notification_type")
        let (type, subtype) = Self.v1Types[v1Type] ?? (NotificationType(rawValue: v1Type), nil)
        guard let unified = try fields.fields("unified_receipt"), let latest = try unified.string("latest_receipt"),
              !latest.isEmpty else {
            throw VerificationError(.missingField, "notification.unified_receipt.latest_receipt is required")
        }
        // Kept for audit and replay without the secret or the receipt.
        var redacted = fields.object
        redacted["password"] = nil
        var unifiedRedacted = unified.object
        unifiedRedacted["latest_receipt"] = nil
        redacted["unified_receipt"] = .object(unifiedRedacted)
        let id = "v1:" + SHA256Digest.lowercaseHex(body)
        return DecodedNotification(id: id, version: "1", notificationType: type,
                                   subtype: subtype, signedDate: 0,
                                   environment: environment, event: nil, v1LatestReceipt: latest,
                                   storedBody: Array(JSONValue.object(redacted).jsonText.utf8))
    }

    /// The lifecycle event for a V1 notification, from Apple's answer about its receipt (never from
    /// the unsigned body): the newest transaction it holds, with that chain's renewal info.
    public static func v1Event(_ decoded: DecodedNotification, bundleId: String, transactions: [CanonicalTransaction],
                               renewals: [CanonicalRenewal]) -> LifecycleEvent? {
        guard let latest = transactions.max(by: { ($0.purchaseDate ?? 0, $0.transactionId) < ($1.purchaseDate ?? 0, $1.transactionId) }) else {
            return nil
        }
        let chain = latest.originalTransactionId ?? latest.transactionId
        // verifyReceipt signs nothing: the newest date Apple states orders the event among its peers.
        let signedDate = [latest.purchaseDate, latest.revocationDate].compactMap { $0 }.max() ?? 0
        return LifecycleEvent(id: decoded.id, bundleId: bundleId, notificationType: decoded.notificationType,
                              subtype: decoded.subtype, signedDate: signedDate, environment: decoded.environment,
                              transaction: latest, renewal: renewals.first { $0.originalTransactionId == chain })
    }

    /// The V1 body's `password` must be the app's shared secret (current or previous), compared as
    /// SHA-256 digests in constant time.
    private func checkSharedSecret(_ password: String, app: AppPolicy) throws(VerificationError) {
        guard let reference = app.sharedSecret else {
            throw VerificationError(.unauthenticated, "\(app.bundleId) has no shared secret: V1 notifications are refused")
        }
        let presented = SHA256Digest.hash(Array(password.utf8))
        var candidates = [try reference.resolve(environment: environment)]
        if let previous = try? reference.resolvePrevious(environment: environment) { candidates.append(previous) }
        var matched = false
        for candidate in candidates {
            matched = APIKeyAuthenticator.constantTimeEqual(presented, SHA256Digest.hash(Array(candidate.utf8))) || matched
        }
        guard matched else { throw VerificationError(.unauthenticated, "the V1 notification's password is not the shared secret") }
    }
}
