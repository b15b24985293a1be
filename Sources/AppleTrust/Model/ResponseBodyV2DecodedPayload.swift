import IAPCore

/// A verified App Store Server Notification V2. Every inner JWS it carries has been verified
/// (chain, signature, kind) and agrees with the outer envelope; the results are the `verified…`
/// properties. Unknown `notificationType`/`subtype` values decode, raw value kept.
public struct ResponseBodyV2DecodedPayload: Sendable, Hashable {
    public let notificationType: NotificationType
    public let subtype: NotificationSubtype?
    public let notificationUUID: String?
    public let version: String?
    public let signedDate: Int64
    public let data: NotificationData?
    public let summary: NotificationSummary?
    public let appData: NotificationData?
    public let externalPurchaseToken: ExternalPurchaseToken?
    public let raw: JSONValue

    public internal(set) var verifiedTransaction: JWSTransactionDecodedPayload?
    public internal(set) var verifiedRenewalInfo: JWSRenewalInfoDecodedPayload?
    public internal(set) var verifiedAppTransaction: AppTransaction?
    /// Bundle, app id and environment as the envelope states them, which the verifier held to its
    /// identity: what the rest of the gateway reads them from, never re-deriving them.
    public internal(set) var verifiedIdentity: EvidenceIdentity?

    public init(_ raw: JSONValue) throws(VerificationError) {
        let f = try JSONFields(raw, context: "notification")
        notificationType = try f.requiredOpen("notificationType")
        subtype = try f.open("subtype")
        notificationUUID = try f.string("notificationUUID")
        version = try f.string("version")
        signedDate = try f.requiredDate("signedDate")
        data = try f.fields("data").map { (d) throws(VerificationError) in try NotificationData(d) }
        summary = try f.fields("summary").map { (s) throws(VerificationError) in try NotificationSummary(s) }
        appData = try f.fields("appData").map { (d) throws(VerificationError) in try NotificationData(d) }
        externalPurchaseToken = try f.fields("externalPurchaseToken").map { (t) throws(VerificationError) in
            try ExternalPurchaseToken(t)
        }
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
