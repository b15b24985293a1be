import Foundation
import IAPCore

/// Signs what StoreKit needs to present a subscription offer, in the three forms Apple's
/// app-store-server-library creates (PromotionalOfferSignatureCreator,
/// PromotionalOfferV2SignatureCreator, IntroductoryOfferEligibilitySignatureCreator), with an
/// In-App Purchase key (`.p8`, EC P-256). Deciding who may get an offer is the gateway's policy,
/// never this type's: it signs what it is asked to.
public final class OfferSigner: Sendable {
    /// The JWS audiences StoreKit 2 checks (Apple's "Generating JWS to sign App Store requests").
    public static let promotionalOfferAudience = "promotional-offer"
    public static let introductoryOfferEligibilityAudience = "introductory-offer-eligibility"

    public let keyId: String
    public let issuerId: String
    public let bundleId: String
    private let key: ECPrivateKey

    public init(privateKeyPEM: String, keyId: String, issuerId: String, bundleId: String) throws(VerificationError) {
        self.key = try ECPrivateKey(pkcs8PEM: privateKeyPEM)
        self.keyId = keyId
        self.issuerId = issuerId
        self.bundleId = bundleId
    }

    /// StoreKit 1's signed payload (`SKPaymentDiscount`): bundle id, key id, product, offer,
    /// appAccountToken and nonce (both lowercased) and the timestamp in ms, joined by U+2063
    /// (INVISIBLE SEPARATOR), in Apple's order.
    public static func promotionalOfferV1Payload(bundleId: String, keyId: String, productId: String, offerId: String,
                                                 appAccountToken: String, nonce: UUID, timestamp: Int64) -> String {
        [bundleId, keyId, productId, offerId, appAccountToken.lowercased(), nonce.uuidString.lowercased(), String(timestamp)]
            .joined(separator: "\u{2063}")
    }

    /// The v1 signature: ECDSA P-256 with SHA-256 over `promotionalOfferV1Payload`, DER, base64.
    public func promotionalOfferV1(productId: String, offerId: String, appAccountToken: String, nonce: UUID,
                                   timestamp: Int64) throws(VerificationError) -> String {
        let payload = Self.promotionalOfferV1Payload(bundleId: bundleId, keyId: keyId, productId: productId, offerId: offerId,
                                                     appAccountToken: appAccountToken, nonce: nonce, timestamp: timestamp)
        return Data(try key.signECDSASHA256DER(Array(payload.utf8))).base64EncodedString()
    }

    /// StoreKit 2's `.promotionalOffer(…, compactJWS:)`: claims `productId`, `offerIdentifier` and,
    /// when known, `transactionId` (any transaction of the customer) beside the common ones.
    public func promotionalOfferV2(productId: String, offerId: String, transactionId: String?, nonce: UUID,
                                   issuedAt: Int64) throws(VerificationError) -> String {
        var claims: [String: JSONValue] = ["productId": .string(productId), "offerIdentifier": .string(offerId)]
        if let transactionId { claims["transactionId"] = .string(transactionId) }
        return try jws(audience: Self.promotionalOfferAudience, claims: claims, nonce: nonce, issuedAt: issuedAt)
    }

    /// StoreKit 2's introductory offer eligibility override: `allowIntroductoryOffer` for the
    /// customer of `transactionId` (required by Apple here).
    public func introductoryOfferEligibility(productId: String, allowIntroductoryOffer: Bool, transactionId: String,
                                             nonce: UUID, issuedAt: Int64) throws(VerificationError) -> String {
        try jws(audience: Self.introductoryOfferEligibilityAudience,
                claims: ["productId": .string(productId), "allowIntroductoryOffer": .bool(allowIntroductoryOffer),
                         "transactionId": .string(transactionId)],
                nonce: nonce, issuedAt: issuedAt)
    }

    /// Header `{alg: ES256, kid, typ: JWT}`; common claims `nonce`, `iss` (issuer id), `bid`, `aud`,
    /// `iat` (seconds), as Apple's JWSSignatureCreator sets them.
    private func jws(audience: String, claims: [String: JSONValue], nonce: UUID, issuedAt: Int64) throws(VerificationError) -> String {
        var payload = claims
        payload["nonce"] = .string(nonce.uuidString.lowercased())
        payload["iss"] = .string(issuerId)
        payload["bid"] = .string(bundleId)
        payload["aud"] = .string(audience)
        payload["iat"] = .int(issuedAt)
        let header: JSONValue = .object(["alg": .string("ES256"), "kid": .string(keyId), "typ": .string("JWT")])
        let input = Base64URL.encode(Array(header.jsonText.utf8)) + "." + Base64URL.encode(Array(JSONValue.object(payload).jsonText.utf8))
        return input + "." + Base64URL.encode(try key.signES256(Array(input.utf8)))
    }
}
