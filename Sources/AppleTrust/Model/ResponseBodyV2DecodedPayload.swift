import IAPCore

/// A verified App Store Server Notification V2. Every inner JWS it carries has been verified
/// (chain, signature, kind) and agrees with the outer envelope; the results are the `verified…`
/// properties. Unknown `notificationType`/`subtype` values decode, raw value kept.
public struct ResponseBodyV2DecodedPayload: Sendable, Hashable, Decodable {
    public let notificationType: NotificationType
    public let subtype: NotificationSubtype?
    public let notificationUUID: String?
    public let version: String?
    public let signedDate: Int64
    public let data: NotificationData?
    public let summary: NotificationSummary?
    public let appData: NotificationData?
    public let externalPurchaseToken: ExternalPurchaseToken?
    public private(set) var raw: JSONValue = .null

    public internal(set) var verifiedTransaction: JWSTransactionDecodedPayload?
    public internal(set) var verifiedRenewalInfo: JWSRenewalInfoDecodedPayload?
    public internal(set) var verifiedAppTransaction: AppTransaction?
    /// Bundle, app id and environment as the envelope states them, which the verifier held to its
    /// identity: what the rest of the gateway reads them from, never re-deriving them.
    public internal(set) var verifiedIdentity: EvidenceIdentity?

    /// The members typed here, read in this order (a refusal names the first bad one). Not `raw`,
    /// the document itself, nor the `verified…` results, which are the verifier's, never the sender's.
    private enum CodingKeys: String, CodingKey {
        case notificationType, subtype, notificationUUID, version, signedDate, data, summary, appData, externalPurchaseToken
    }

    public init(_ raw: JSONValue) throws(VerificationError) {
        self = try PayloadDecoding.decode(raw, context: "notification")
        self.raw = raw
    }

    /// The decoded inner payloads, keyed by the field that carried them (CLI and audit output).
    public var innerPayloads: [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        if let t = verifiedTransaction { out["signedTransactionInfo"] = t.raw }
        if let r = verifiedRenewalInfo { out["signedRenewalInfo"] = r.raw }
        if let a = verifiedAppTransaction { out["signedAppTransactionInfo"] = a.raw }
        return out
    }
}
