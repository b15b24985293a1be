import Adapters
import IAPConfig
import IAPCore

/// What a claim is checked against: the app's policy, the claiming account, the kind of evidence.
public struct ClaimContext: Sendable {
    public var app: AppPolicy
    public var account: String
    public var evidenceKind: AppPolicy.EvidenceKind
    /// Milliseconds since 1970.
    public var now: Int64
}

/// The decisions an adapter asks for while it works (`EvidencePolicy`), for one claimant: the
/// claimant's identity of the app (`AppPolicy.identity(for:)`) and the one rule (`AppIdentity.check`),
/// which the purchase checks apply to the outcome afterwards and the app's JWS verifier to every
/// payload Apple signed.
public struct ClaimPolicy: EvidencePolicy {
    public let app: AppPolicy
    public let claimant: Claimant
    public let identity: AppIdentity

    public init(app: AppPolicy, claimant: Claimant) {
        self.app = app
        self.claimant = claimant
        self.identity = app.identity(for: claimant)
    }

    public func accepts(_ environment: AppStoreEnvironment) -> Bool { identity.environments.contains(environment) }

    public func admit(_ identity: EvidenceIdentity) throws(VerificationError) { try self.identity.check(identity) }
}

/// One reason to refuse a verified purchase, after its signature and before it is bound or granted.
/// The gateway runs a list of these, like certificate policies: each small, each one reason. (What
/// the app's own purchase grants and what is refunded are decisions handed on, not only refusals:
/// `PurchaseRuling` makes them, around this list.)
public protocol PurchaseCheck: Sendable {
    func check(_ outcome: AdapterOutcome, _ context: ClaimContext) throws(VerificationError)
}

extension Array where Element == any PurchaseCheck {
    /// The checks every claim passes, in the order their refusals are most useful to a caller.
    public static var standard: [any PurchaseCheck] {
        [IdentityCheck(), CatalogCheck(), FamilySharingCheck(), AppAccountTokenCheck()]
    }

    public func run(_ outcome: AdapterOutcome, _ context: ClaimContext) throws(VerificationError) {
        for check in self { try check.check(outcome, context) }
    }
}

/// Another app's purchase, or one from an environment this claim may not use, is refused whichever
/// path verified it (`AppIdentity.check`, for the claiming account); every transaction must be from
/// the evidence's environment.
public struct IdentityCheck: PurchaseCheck {
    public init() {}
    public func check(_ outcome: AdapterOutcome, _ context: ClaimContext) throws(VerificationError) {
        let policy = ClaimPolicy(app: context.app, claimant: .account(context.account))
        let env = outcome.environment
        if let receipt = outcome.appTransaction {
            try policy.admit(EvidenceIdentity(bundleId: receipt.bundleId, appAppleId: receipt.appAppleId, environment: env))
        }
        for t in outcome.transactions {
            try policy.admit(EvidenceIdentity(bundleId: t.bundleId, appAppleId: t.appAppleId ?? outcome.appTransaction?.appAppleId,
                                              environment: env))
        }
        try policy.admit(EvidenceIdentity(environment: env))
        for t in outcome.transactions where t.environment != nil && t.environment != env {
            throw VerificationError(.environmentNotAllowed,
                                    "transaction \(ClientExcerpt.of(t.transactionId)) is from \(ClientExcerpt.of(t.environment!.rawValue)), the evidence from \(env)")
        }
    }
}

/// Only products the app sells, of the type it sells them as, at the price it set (where known).
public struct CatalogCheck: PurchaseCheck {
    public init() {}
    public func check(_ outcome: AdapterOutcome, _ context: ClaimContext) throws(VerificationError) {
        for t in outcome.transactions {
            guard let product = context.app.productCatalog[t.productId] else {
                throw VerificationError(.unknownProduct, "product \(ClientExcerpt.of(t.productId, limit: 200)) is not in the catalog of \(context.app.bundleId)")
            }
            if let type = t.type, type != product.type {
                throw VerificationError(.productTypeMismatch, "product \(ClientExcerpt.of(t.productId, limit: 200)) is \(ClientExcerpt.of(type.rawValue)), the catalog says \(product.type)")
            }
            // Legacy receipts carry no price. A price Apple signed is compared where it is
            // comparable: in the catalog's currency and at list price (an introductory, promotional,
            // offer-code or win-back price is the offer's, not the product's). A price in another
            // storefront's currency cannot be judged against one catalog price and is not refused.
            if let price = t.price, let expected = product.priceMilliunits, let currency = t.currency,
               let expectedCurrency = product.currency, currency == expectedCurrency, t.offerType == nil,
               price != expected {
                throw VerificationError(.priceMismatch, "product \(ClientExcerpt.of(t.productId, limit: 200)) was sold at \(price) milliunits, the catalog says \(expected)")
            }
        }
    }
}

/// Family-shared purchases only where the app's policy accepts them.
public struct FamilySharingCheck: PurchaseCheck {
    public init() {}
    public func check(_ outcome: AdapterOutcome, _ context: ClaimContext) throws(VerificationError) {
        guard context.app.familySharingPolicy == .deny else { return }
        if let t = outcome.transactions.first(where: { $0.inAppOwnershipType == .familyShared }) {
            throw VerificationError(.familySharingNotAllowed, "transaction \(ClientExcerpt.of(t.transactionId)) is family-shared")
        }
    }
}

/// A transaction that carries an appAccountToken belongs to the account it was derived from.
public struct AppAccountTokenCheck: PurchaseCheck {
    public init() {}
    public func check(_ outcome: AdapterOutcome, _ context: ClaimContext) throws(VerificationError) {
        // Derived only when some transaction carries a token to compare it with.
        guard outcome.transactions.contains(where: { $0.appAccountToken?.isEmpty == false }) else { return }
        let expected = AppAccountToken.derive(bundleId: context.app.bundleId, account: context.account)
        for t in outcome.transactions {
            if let token = t.appAccountToken, !token.isEmpty, token.lowercased() != expected {
                throw VerificationError(.appAccountTokenMismatch,
                                        "transaction \(ClientExcerpt.of(t.transactionId)) was bought with another account's appAccountToken")
            }
        }
    }
}
