import AppleTrust
import Foundation
import HTTPServer
import IAPConfig
import IAPCore
import Ledger
import Synchronization

/// POST /v1/apps/{bundleId}/offer-signatures: signs what StoreKit needs to present a subscription
/// offer, only for an account and product the app's policy allows (`promotionalOffers`, judged by
/// `OfferEligibility` from what the ledger knows of the account).
struct OfferSignaturesEndpoint: Sendable {
    let ledger: any Ledger
    let signers: OfferSigners
    let now: @Sendable () -> Int64

    /// `key`: the request's `Idempotency-Key`; a retry under it gets the same signature (nonce and time included).
    func answer(_ request: HTTPRequest, app: AppPolicy, key: IdempotentWrite?) async throws(VerificationError) -> HTTPResponse {
        let signed = try await signature(request, app: app)
        if let key { try await ledger.storeIdempotentAnswer(key, bundleId: app.bundleId, status: 200, body: signed, now: now()) }
        return .json(200, signed)
    }

    /// The answer's body.
    private func signature(_ request: HTTPRequest, app: AppPolicy) async throws(VerificationError) -> String {
        let body = try RequestBody(request, allowed: ["account", "productId", "promotionalOffer", "format",
                                                      "introductoryOfferEligibility"])
        let account = try body.account()
        guard let productId = try body.string("productId") else {
            throw VerificationError(.malformedRequest, "body.productId is required")
        }
        switch (try body.string("promotionalOffer"), try body.bool("introductoryOfferEligibility")) {
        case (let offerId?, nil):
            let format = try body.string("format")
            guard format == "v1" || format == "v2" else {
                throw VerificationError(.malformedRequest, "body.format must be \"v1\" or \"v2\" with a promotionalOffer")
            }
            guard let offer = app.promotionalOffer(productId: productId, offerId: offerId) else {
                throw VerificationError(.offerNotAllowed, "the app's policy lists no promotional offer \(ClientExcerpt.of(offerId)) of \(ClientExcerpt.of(productId, limit: 200))")
            }
            let eligibility = try await eligibility(app, account, group: offer.groupProductIds)
            try eligibility.require(offer.audience)
            return try sign(format == "v1" ? .promotionalV1(offerId) : .promotionalV2(offerId), productId, app, account, eligibility)
        case (nil, let allow?):
            guard try body.string("format") == nil else {
                throw VerificationError(.malformedRequest, "body.format goes with promotionalOffer only")
            }
            guard app.productCatalog[productId]?.type == .autoRenewable else {
                throw VerificationError(.offerNotAllowed, "\(ClientExcerpt.of(productId, limit: 200)) is not an auto-renewable subscription of the app's catalog")
            }
            let eligibility = try await eligibility(app, account, group: [productId])
            try eligibility.requireIntroductoryOffer(allowed: allow)
            return try sign(.introductoryOfferEligibility(allow), productId, app, account, eligibility)
        default:
            throw VerificationError(.malformedRequest, "exactly one of promotionalOffer (with format) or introductoryOfferEligibility")
        }
    }

    private enum Signature {
        case promotionalV1(String), promotionalV2(String), introductoryOfferEligibility(Bool)
    }

    private func eligibility(_ app: AppPolicy, _ account: String, group: Set<String>) async throws(VerificationError) -> OfferEligibility {
        let entitlements = try await ledger.entitlements(bundleId: app.bundleId, account: account)
        return OfferEligibility(entitlements: entitlements, group: group, policy: app, now: now())
    }

    private func sign(_ signature: Signature, _ productId: String, _ app: AppPolicy, _ account: String,
                      _ eligibility: OfferEligibility) throws(VerificationError) -> String {
        let signer = try signers.signer(for: app)
        let nonce = UUID()
        let now = now()
        let answer: Signed
        switch signature {
        case .promotionalV1(let offerId):
            let token = AppAccountToken.derive(bundleId: app.bundleId, account: account)
            answer = Signed(format: "v1", signature: try signer.promotionalOfferV1(productId: productId, offerId: offerId,
                                                                                    appAccountToken: token, nonce: nonce, timestamp: now),
                            keyIdentifier: signer.keyId, nonce: nonce.uuidString.lowercased(), timestamp: now)
        case .promotionalV2(let offerId):
            answer = Signed(format: "v2", signature: try signer.promotionalOfferV2(productId: productId, offerId: offerId,
                                                                                    transactionId: eligibility.transactionId,
                                                                                    nonce: nonce, issuedAt: now / 1000))
        case .introductoryOfferEligibility(let allow):
            guard let transactionId = eligibility.transactionId else {
                throw VerificationError(.offerNotAllowed, "the gateway knows no purchase of this account; Apple's eligibility signature names one")
            }
            answer = Signed(format: "introductoryOfferEligibility",
                            signature: try signer.introductoryOfferEligibility(productId: productId, allowIntroductoryOffer: allow,
                                                                              transactionId: transactionId, nonce: nonce, issuedAt: now / 1000))
        }
        return Self.answer.encode(answer).jsonText
    }

    /// A signature as StoreKit takes it; the key id, nonce and timestamp are v1's only (v2 and
    /// eligibility carry them inside their JWS).
    struct Signed: Sendable {
        let format: String
        let signature: String
        var keyIdentifier: String?
        var nonce: String?
        var timestamp: Int64?
    }

    static let answer = JSONShape<Signed>.object([
        .required("format", .oneOf(["v1", "v2", "introductoryOfferEligibility"])) { $0.format },
        .required("signature", .string) { $0.signature },
        .optional("keyIdentifier", .string) { $0.keyIdentifier },
        .optional("nonce", .string) { $0.nonce },
        .optional("timestamp", .integer) { $0.timestamp },
    ]).described("v1: StoreKit 1's SKPaymentDiscount values (signature: base64 DER ECDSA P-256); v2 and introductoryOfferEligibility: a compact JWS for StoreKit 2")
        .named("OfferSignature")
}

/// The offer signer of each app, made from its key the first time it is needed (a gateway whose
/// apps sign no offers starts without the key present) and kept after.
final class OfferSigners: Sendable {
    private let environment: [String: String]
    private let made = Mutex<[String: OfferSigner]>([:])

    init(environment: [String: String]) { self.environment = environment }

    func signer(for app: AppPolicy) throws(VerificationError) -> OfferSigner {
        if let signer = made.withLock({ $0[app.bundleId] }) { return signer }
        guard let key = app.offerSigningKey else {
            throw VerificationError(.offerNotAllowed, "the app's policy names no key to sign offers with")
        }
        // SecretReference messages name the reference, never the value; both are for the log only (500).
        let signer = try OfferSigner(privateKeyPEM: try key.privateKey.resolve(environment: environment), keyId: key.keyId,
                                     issuerId: key.issuerId, bundleId: app.bundleId)
        made.withLock { $0[app.bundleId] = signer }
        return signer
    }
}

extension OfferSignaturesEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route("POST", "/v1/apps/{bundleId}/offer-signatures", name: "offer_signatures", body: "OfferSignatureRequest", answer: answer,
              summary: "Sign a subscription offer for StoreKit (promotional offer v1 or v2, introductory offer eligibility), only for an account and product the app's policy allows",
              refusals: ["403": .error("the app's policy does not give this account this offer (OFFER_NOT_ALLOWED)")],
              handler: .keyed { endpoints, request, app, key throws(VerificationError) in
                  try await endpoints.offerSignatures.answer(request, app: app, key: key)
              }),
    ]
}
