import Adapters
import AppleTrust
import Foundation
import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// POST /v1/retention/{bundleId}: the Retention Messaging API's realtime URL. Public (the App
/// Store calls it while a subscriber looks at cancelling), so only Apple's signature is trusted:
/// the `signedPayload` is verified like a notification's before anything in it is read. The answer
/// is Apple's RealtimeResponseBody, chosen by the app's `retentionMessages` rules from the request
/// (product, locale) and what the ledger knows of the chain's account (state, tenure, refunds);
/// every answer and refusal is audited. Apple shows its default message for `{}` or any error.
struct RetentionEndpoint: Sendable {
    let ledger: any Ledger
    let signers: OfferSigners
    /// The app's one JWS verifier, the one notifications use.
    let verifiers: AppVerifiers
    let logger: Logger
    let now: @Sendable () -> Int64

    func answer(_ request: HTTPRequest, app: AppPolicy) async throws(VerificationError) -> HTTPResponse {
        let rules = app.retentionMessages
        let started = DispatchTime.now().uptimeNanoseconds
        // The evidence is the body as received: a malformed one is audited as refused like the rest.
        var audit = AuditRecord(time: now(), bundleId: app.bundleId, account: nil, evidenceKind: "retention",
                                evidenceSHA256: SHA256Digest.lowercaseHex(request.body), transactionIds: [], productIds: [],
                                environment: nil, verdict: .refused, errorCode: nil, adapter: nil, latencyMicros: 0)
        do throws(VerificationError) {
            guard case .object(let body) = try RequestBody.parse(request.body, maxDepth: 4), body.count == 1,
                  case .string(let jws)? = body["signedPayload"] else {
                throw VerificationError(.malformedRequest, "a realtime request body is {\"signedPayload\": \"…\"}")
            }
            // App id and environment are held to the app's identity by the verifier.
            let realtime = try await verifiers.verifier(for: app).verifying { verifier throws(VerificationError) in
                try verifier.verifyAndDecodeRealtimeRequest(jws)
            }
            audit.transactionIds = [realtime.originalTransactionId]
            audit.productIds = [realtime.productId]
            audit.environment = realtime.environment.rawValue
            let account = try await AccountKnowledge.load(app, realtime.originalTransactionId, ledger: ledger, now: now())
            audit.account = account?.account
            let (kind, response) = try choose(rules, realtime, account, app)
            audit.evidenceKind = "retention.\(kind)"
            audit.verdict = .granted
            audit.latencyMicros = Int64((DispatchTime.now().uptimeNanoseconds - started) / 1000)
            try await ledger.recordAudit(audit)
            logger.info("retention_answered", ["bundleId": app.bundleId, "answer": kind])
            return .json(200, response.jsonText)
        } catch {
            // A refusal is audited too; an audit that fails here must not hide the refusal's reason.
            audit.errorCode = error.code
            audit.latencyMicros = Int64((DispatchTime.now().uptimeNanoseconds - started) / 1000)
            if error.code != .storageUnavailable {
                do throws(VerificationError) { try await ledger.recordAudit(audit) } catch {
                    logger.warning("retention_audit_failed", ["bundleId": app.bundleId, "code": error.code.rawValue])
                }
            }
            logger.warning("retention_refused", ["bundleId": app.bundleId, "code": error.code.rawValue])
            throw error
        }
    }

    /// The first rule whose every condition holds, and its RealtimeResponseBody; `none` / `{}`.
    private func choose(_ rules: [AppPolicy.RetentionRule], _ realtime: DecodedRealtimeRequestBody, _ account: AccountKnowledge?,
                        _ app: AppPolicy) throws(VerificationError) -> (String, JSONValue) {
        let answer = Self.answer.encode
        for rule in rules {
            guard rule.productIds.isEmpty || rule.productIds.contains(realtime.productId), rule.matches(locale: realtime.userLocale) else { continue }
            if rule.needsAccount {
                guard let account else { continue }
                if !rule.states.isEmpty { guard let state = account.chainState, rule.states.contains(state) else { continue } }
                if let minimum = rule.minimumTenureDays { guard let days = account.tenureDays, days >= minimum else { continue } }
                if let maximum = rule.maximumTenureDays { guard let days = account.tenureDays, days <= maximum else { continue } }
                if rule.noRefund, account.hasRefund { continue }
            }
            switch rule.answer {
            case .message(let id):
                return ("message", answer(Realtime(message: id)))
            case .alternateProduct(let id, let productId):
                return ("alternateProduct", answer(Realtime(alternateProduct: (id, productId))))
            case .promotionalOffer(let id, let offerId):
                // The decoder made sure the rule's products list the offer; its audience is judged as for offer-signatures.
                guard let account, let offer = app.promotionalOffer(productId: realtime.productId, offerId: offerId) else { continue }
                let eligibility = OfferEligibility(entitlements: account.entitlements, group: offer.groupProductIds, policy: app, now: now())
                do { try eligibility.require(offer.audience) } catch { continue }
                let nowMs = now()
                let jws = try signers.signer(for: app).promotionalOfferV2(
                    productId: realtime.productId, offerId: offerId, transactionId: realtime.originalTransactionId,
                    nonce: UUID(), issuedAt: nowMs / 1000)
                return ("promotionalOffer", answer(Realtime(promotionalOffer: (id, jws))))
            }
        }
        return ("none", answer(Realtime()))
    }

    /// Apple's RealtimeResponseBody: at most one of its three answers; none lets Apple show its default message.
    struct Realtime: Sendable {
        var message: String?
        var alternateProduct: (messageIdentifier: String, productId: String)?
        var promotionalOffer: (messageIdentifier: String, signature: String)?
    }

    static let answer = JSONShape<Realtime>.object([
        .optional("message", .object([.required("messageIdentifier", .string) { $0 }])) { $0.message },
        .optional("alternateProduct", .object([
            .required("messageIdentifier", .string) { $0.messageIdentifier },
            .required("productId", .string) { $0.productId },
        ])) { $0.alternateProduct },
        .optional("promotionalOffer", .object([
            .required("messageIdentifier", .string) { $0.messageIdentifier },
            .required("promotionalOfferSignatureV2", .string) { $0.signature },
        ])) { $0.promotionalOffer },
    ]).described("Apple's RealtimeResponseBody: at most one of message, alternateProduct, promotionalOffer (a v2 JWS); {} lets Apple show the default message")
        .named("RealtimeResponse")
}

/// What the gateway knows of the account behind a purchase chain, for the retention rules.
struct AccountKnowledge {
    let account: String
    /// Every entitlement of the account (as stored; judged at the answer's time where used).
    let entitlements: [Entitlement]
    /// The chain's state now; nil when the account holds no entitlement of it.
    let chainState: Entitlement.State?
    /// Whole days since the chain's first purchase; nil when no transaction of it is stored.
    let tenureDays: Int64?
    let hasRefund: Bool

    /// nil: no account owns the chain (a purchase never verified through the gateway).
    static func load(_ app: AppPolicy, _ originalTransactionId: String, ledger: any Ledger, now: Int64) async throws(VerificationError)
        -> AccountKnowledge? {
        guard let account = try await ledger.owner(bundleId: app.bundleId, originalTransactionId: originalTransactionId) else { return nil }
        let entitlements = try await ledger.entitlements(bundleId: app.bundleId, account: account)
        let current = entitlements.map { EntitlementAccess.current($0, now: now) }
        let first = try await ledger.transactions(bundleId: app.bundleId, originalTransactionId: originalTransactionId)
            .compactMap { $0.originalPurchaseDate ?? $0.purchaseDate }.min()
        return AccountKnowledge(account: account, entitlements: entitlements,
                                chainState: current.first { $0.originalTransactionId == originalTransactionId }?.state,
                                tenureDays: first.map { max(0, now - $0) / 86_400_000 },
                                hasRefund: current.contains { $0.state.isTakenBack })
    }
}

extension RetentionEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route("POST", "/v1/retention/{bundleId}", name: "retention", body: "RealtimeRequest", answer: answer,
              summary: "Retention Messaging API realtime URL (Apple calls it; signedPayload verified like a notification's): the RealtimeResponseBody the app's retentionMessages rules choose, {} for Apple's default message; every answer audited",
              refusals: [
                  "422": .error("or the request was signed more than 60 s ago (SIGNED_DATE_TOO_OLD: a replay); nothing is offered"),
                  "503": .error("Apple shows its default message"),
              ],
              handler: .signed { endpoints, request, app throws(VerificationError) in
                  try await endpoints.retention.answer(request, app: app)
              }),
    ]
}
