import Foundation
import IAPCore

/// How the gateway answers the App Store's Retention Messaging realtime requests for an app
/// (`retentionMessages` in the app file; README, "Retention messages"): rules tried in order, the
/// first whose every condition holds chooses the answer; none: Apple shows its default message.
extension AppPolicy {
    public struct RetentionRule: Sendable, Equatable {
        /// The subscription the customer is looking at; empty: any.
        public var productIds: Set<String> = []
        /// The customer's locale: `en-US` matches itself, `en` every `en-…`; empty: any.
        public var locales: [String] = []
        /// The chain's state now (as every answer judges it); empty: any, the unknown chain included.
        public var states: Set<Entitlement.State> = []
        /// Days since the chain's first purchase.
        public var minimumTenureDays: Int64?
        public var maximumTenureDays: Int64?
        /// Only for an account with no refunded or revoked purchase of the app.
        public var noRefund = false
        public var answer: RetentionAnswer

        /// Whether the rule asks about the account, so a chain the gateway does not know never matches it.
        public var needsAccount: Bool {
            !states.isEmpty || minimumTenureDays != nil || maximumTenureDays != nil || noRefund
                || { if case .promotionalOffer = answer { true } else { false } }()
        }

        public func matches(locale: String) -> Bool {
            let wanted = locale.lowercased()
            return locales.isEmpty || locales.contains { l in
                let rule = l.lowercased()
                return wanted == rule || wanted.hasPrefix(rule + "-") || wanted.hasPrefix(rule + "_")
            }
        }
    }

    /// Apple's RealtimeResponseBody choices; message identifiers are those set up in App Store Connect.
    public enum RetentionAnswer: Sendable, Equatable {
        case message(messageIdentifier: String)
        case alternateProduct(messageIdentifier: String, productId: String)
        /// A promotional offer of the request's product (listed in `promotionalOffers`, its audience
        /// judged as for `offer-signatures`), signed as a v2 JWS.
        case promotionalOffer(messageIdentifier: String, offerId: String)
    }
}

extension AppPolicyDecoder {
    /// `retentionMessages [{productIds?, locales?, states?, minimumTenureDays?, maximumTenureDays?,
    /// noRefund?, message | alternateProduct | promotionalOffer}]`.
    func decodeRetentionRules(_ field: ConfigField, catalog: [String: AppPolicy.Product],
                              offers: [AppPolicy.PromotionalOffer]) throws(VerificationError) -> [AppPolicy.RetentionRule] {
        var rules: [AppPolicy.RetentionRule] = []
        for item in try field.array() {
            let o = try item.object()
            var productIds = Set<String>()
            for p in try o.optional("productIds")?.array() ?? [] {
                let id = try p.nonEmptyString()
                guard catalog[id]?.type == .autoRenewable else { throw p.fail("\(id) is not an auto-renewable subscription of productCatalog") }
                productIds.insert(id)
            }
            var locales: [String] = []
            for l in try o.optional("locales")?.array() ?? [] { locales.append(try l.nonEmptyString()) }
            var states = Set<Entitlement.State>()
            for s in try o.optional("states")?.array() ?? [] {
                states.insert(try s.oneOf(Entitlement.State.allCases.map { ($0.rawValue, $0) }))
            }
            let minimum = try o.optional("minimumTenureDays")?.integer(in: 0...36_500)
            let maximum = try o.optional("maximumTenureDays")?.integer(in: 0...36_500)
            let noRefund = try o.optional("noRefund")?.bool() ?? false
            let choices = [o.optional("message"), o.optional("alternateProduct"), o.optional("promotionalOffer")]
            try o.finish()
            guard choices.compactMap({ $0 }).count == 1 else {
                throw item.fail("give exactly one of message, alternateProduct or promotionalOffer")
            }
            let answer: AppPolicy.RetentionAnswer
            if let f = choices[0] {
                let m = try f.object()
                answer = .message(messageIdentifier: try messageIdentifier(m.required("messageIdentifier")))
                try m.finish()
            } else if let f = choices[1] {
                let m = try f.object()
                let id = try messageIdentifier(m.required("messageIdentifier"))
                let productField = try m.required("productId")
                let product = try productField.nonEmptyString()
                try m.finish()
                guard catalog[product]?.type == .autoRenewable else {
                    throw productField.fail("\(product) is not an auto-renewable subscription of productCatalog")
                }
                answer = .alternateProduct(messageIdentifier: id, productId: product)
            } else {
                let m = try choices[2]!.object()
                let id = try messageIdentifier(m.required("messageIdentifier"))
                let offerField = try m.required("offerId")
                let offerId = try offerField.nonEmptyString()
                try m.finish()
                // The offer is signed for the request's product: each product of the rule must list it.
                guard !productIds.isEmpty,
                      productIds.allSatisfy({ p in offers.contains { $0.productId == p && $0.offerId == offerId } }) else {
                    throw offerField.fail("the rule's productIds must each list \(offerId) in promotionalOffers")
                }
                answer = .promotionalOffer(messageIdentifier: id, offerId: offerId)
            }
            if let minimum, let maximum, minimum > maximum { throw item.fail("minimumTenureDays is above maximumTenureDays") }
            var rule = AppPolicy.RetentionRule(answer: answer)
            rule.productIds = productIds
            rule.locales = locales
            rule.states = states
            rule.minimumTenureDays = minimum
            rule.maximumTenureDays = maximum
            rule.noRefund = noRefund
            rules.append(rule)
        }
        return rules
    }

    private func messageIdentifier(_ field: ConfigField) throws(VerificationError) -> String {
        let text = try field.nonEmptyString()
        guard let uuid = UUID(uuidString: text) else { throw field.fail("not a UUID (Apple's message identifiers are)") }
        return uuid.uuidString.lowercased()
    }
}
