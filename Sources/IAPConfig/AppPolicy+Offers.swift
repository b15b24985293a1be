import Foundation
import IAPCore

/// Which subscription offers the gateway signs for an app, for whom, and with which key
/// (`offerSigning`, `promotionalOffers` in the app file; README, "Signed offers").
extension AppPolicy {
    /// Who may be offered a subscription offer, judged from the account's entitlements in the
    /// offer's subscription group (the offer's `groupProductIds`).
    public enum OfferAudience: String, Sendable, CaseIterable {
        /// Any account of the app.
        case anyone
        /// Accounts with a subscription in the group that grants access now.
        case subscribers
        /// A win-back: accounts that once held a subscription in the group, hold none that grants
        /// access now, and have no refunded or revoked purchase of the app.
        case winBack
    }

    /// One promotional offer set up in App Store Connect that the gateway may sign.
    public struct PromotionalOffer: Sendable, Equatable {
        public var productId: String
        /// The offer's identifier in App Store Connect.
        public var offerId: String
        public var audience: OfferAudience
        /// The subscription group the audience is judged in: these catalog products (the offer's
        /// product among them; default that product alone).
        public var groupProductIds: Set<String>
        public init(productId: String, offerId: String, audience: OfferAudience, groupProductIds: Set<String>) {
            self.productId = productId
            self.offerId = offerId
            self.audience = audience
            self.groupProductIds = groupProductIds.union([productId])
        }
    }

    /// The key offers are signed with: `offerSigning`, else the Server API's; nil: none can be signed.
    public var offerSigningKey: InAppPurchaseKey? { offerSigning ?? serverAPI }

    /// The promotional offer `offerId` of `productId`, if the policy lists it.
    public func promotionalOffer(productId: String, offerId: String) -> PromotionalOffer? {
        promotionalOffers.first { $0.productId == productId && $0.offerId == offerId }
    }
}

extension AppPolicyDecoder {
    /// `promotionalOffers [{productId, offerId, audience, groupProductIds?}]`: each product an
    /// auto-renewable subscription of the catalog, each (product, offer) once.
    func decodePromotionalOffers(_ field: ConfigField, catalog: [String: AppPolicy.Product]) throws(VerificationError)
        -> [AppPolicy.PromotionalOffer] {
        var offers: [AppPolicy.PromotionalOffer] = []
        for item in try field.array() {
            let o = try item.object()
            let productId = try subscription(o.required("productId"), catalog: catalog)
            let offerField = try o.required("offerId")
            let offerId = try offerField.nonEmptyString()
            let audience = try o.required("audience").oneOf(AppPolicy.OfferAudience.allCases.map { ($0.rawValue, $0) })
            var group = Set<String>()
            for member in try o.optional("groupProductIds")?.array() ?? [] {
                group.insert(try subscription(member, catalog: catalog))
            }
            try o.finish()
            guard !offers.contains(where: { $0.productId == productId && $0.offerId == offerId }) else {
                throw offerField.fail("offer \(offerId) of \(productId) listed twice")
            }
            offers.append(AppPolicy.PromotionalOffer(productId: productId, offerId: offerId, audience: audience,
                                                     groupProductIds: group))
        }
        return offers
    }

    private func subscription(_ field: ConfigField, catalog: [String: AppPolicy.Product]) throws(VerificationError) -> String {
        let productId = try field.nonEmptyString()
        guard catalog[productId]?.type == .autoRenewable else {
            throw field.fail("\(productId) is not an auto-renewable subscription of productCatalog")
        }
        return productId
    }
}
