import Adapters
import IAPConfig
import IAPCore

/// Who presents evidence: an app backend for one of its accounts, or Apple itself (a notification,
/// and the receipt a V1 one carries, names no account).
public enum Claimant: Sendable, Equatable {
    case account(String)
    case apple
}

/// What a claim is checked against: the app's policy, the claiming account, the kind of evidence.
public struct ClaimContext: Sendable {
    public var app: AppPolicy
    public var account: String
    public var evidenceKind: AppPolicy.EvidenceKind
    /// Milliseconds since 1970.
    public var now: Int64

    public init(app: AppPolicy, account: String, evidenceKind: AppPolicy.EvidenceKind, now: Int64) {
        self.app = app
        self.account = account
        self.evidenceKind = evidenceKind
        self.now = now
    }
}

/// The one environment rule, for every adapter and every notification: an environment is accepted
/// when some claim of the app may use it (`AppPolicy.acceptableEnvironments`), and Sandbox, when the
/// app does not allow it outright, only for its App Review accounts (`sandboxAccounts`). Apple's own
/// notifications name no account: they are accepted from wherever some claim may come.
public enum EnvironmentRule {
    public static func accepts(_ environment: AppStoreEnvironment, app: AppPolicy, claimant: Claimant) -> Bool {
        guard app.acceptableEnvironments.contains(environment) else { return false }
        if environment == .sandbox, case .account(let account) = claimant { return app.allowsSandbox(forAccount: account) }
        return true
    }

    public static func check(_ environment: AppStoreEnvironment, app: AppPolicy, claimant: Claimant) throws(VerificationError) {
        guard accepts(environment, app: app, claimant: claimant) else {
            throw VerificationError(environment.isLocalTest ? .testEnvironmentNotAllowed : .environmentNotAllowed,
                                    "\(ClientExcerpt.of(environment.rawValue)) evidence is not accepted for \(app.bundleId)")
        }
    }
}

/// The one bundle and app-id rule: what evidence states must be this app. Sandbox receipts carry
/// app id 0 (Apple assigns the id in production only), so outside Production 0 is no statement;
/// a receipt always names its bundle, and in Production its app id.
public enum IdentityRule {
    public static func check(_ identity: EvidenceIdentity, app: AppPolicy) throws(VerificationError) {
        if let bundle = identity.bundleId {
            guard bundle == app.bundleId else {
                throw VerificationError(.bundleIdMismatch, "evidence is for bundle \(ClientExcerpt.of(bundle, limit: 200)), not \(app.bundleId)")
            }
        } else if identity.isReceipt {
            throw VerificationError(.bundleIdMismatch, "the receipt names no bundle; \(app.bundleId) expected")
        }
        guard let expected = app.appAppleId else { return }
        switch identity.appAppleId {
        case let actual? where identity.environment == .production || actual != 0:
            guard actual == expected else {
                throw VerificationError(.appAppleIdMismatch, "evidence is for app \(actual), not \(expected)")
            }
        case nil where identity.isReceipt && identity.environment == .production:
            throw VerificationError(.appAppleIdMismatch, "the Production receipt names no app id; \(expected) expected")
        default:
            return
        }
    }
}

/// The decisions an adapter asks for while it works (`EvidencePolicy`), made by the rules above for
/// one claimant: the same rules the purchase checks apply to the outcome afterwards.
public struct ClaimPolicy: EvidencePolicy {
    public let app: AppPolicy
    public let claimant: Claimant

    public func accepts(_ environment: AppStoreEnvironment) -> Bool {
        EnvironmentRule.accepts(environment, app: app, claimant: claimant)
    }

    /// Bundle, app id, then environment: the order of the purchase checks.
    public func admit(_ identity: EvidenceIdentity) throws(VerificationError) {
        try IdentityRule.check(identity, app: app)
        if let environment = identity.environment { try EnvironmentRule.check(environment, app: app, claimant: claimant) }
    }
}

/// One reason to refuse a verified purchase, after its signature and before it is bound or granted.
/// The gateway runs a list of these, like certificate policies: each small, each one reason.
public protocol PurchaseCheck: Sendable {
    func check(_ outcome: AdapterOutcome, _ context: ClaimContext) throws(VerificationError)
}

extension Array where Element == any PurchaseCheck {
    /// The checks every claim passes, in the order their refusals are most useful to a caller.
    public static var standard: [any PurchaseCheck] {
        [NonEmptyCheck(), BundleIdentityCheck(), EnvironmentCheck(), CatalogCheck(), FamilySharingCheck(),
         AppAccountTokenCheck(), RevocationCheck()]
    }

    public func run(_ outcome: AdapterOutcome, _ context: ClaimContext) throws(VerificationError) {
        for check in self { try check.check(outcome, context) }
    }
}

/// Evidence that proves no purchase grants nothing: refused rather than answered "ok, nothing".
public struct NonEmptyCheck: PurchaseCheck {
    public init() {}
    public func check(_ outcome: AdapterOutcome, _ context: ClaimContext) throws(VerificationError) {
        // An app transaction is the app's own purchase: what it grants is the grandfathering rule's;
        // a receipt without in-app purchases still proves a grandfathered download.
        guard !outcome.transactions.isEmpty || context.evidenceKind.isAppTransaction
                || !GrandfatheringGrant.entitlements(outcome, context).isEmpty else {
            throw VerificationError(.noTransactions, "the evidence carries no in-app purchase")
        }
    }
}

/// Another app's purchase is refused, whichever path verified it (`IdentityRule`).
public struct BundleIdentityCheck: PurchaseCheck {
    public init() {}
    public func check(_ outcome: AdapterOutcome, _ context: ClaimContext) throws(VerificationError) {
        let environment = outcome.environment
        if let receipt = outcome.appTransaction {
            try IdentityRule.check(EvidenceIdentity(bundleId: receipt.bundleId, appAppleId: receipt.appAppleId,
                                                    environment: environment), app: context.app)
        }
        for t in outcome.transactions {
            try IdentityRule.check(EvidenceIdentity(bundleId: t.bundleId, appAppleId: t.appAppleId ?? outcome.appTransaction?.appAppleId,
                                                    environment: environment), app: context.app)
        }
    }
}

/// Evidence from an environment the claim may not use is refused (`EnvironmentRule`); every
/// transaction must be from the evidence's environment.
public struct EnvironmentCheck: PurchaseCheck {
    public init() {}
    public func check(_ outcome: AdapterOutcome, _ context: ClaimContext) throws(VerificationError) {
        let env = outcome.environment
        try EnvironmentRule.check(env, app: context.app, claimant: .account(context.account))
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

/// Evidence whose presented purchases are all refunded or revoked grants nothing, and says so with
/// the same refusal for every kind of evidence: the transaction a client presents on its own (a
/// transaction ID, a signed transaction), even when the rest of its chain came with it, and a
/// receipt whose every purchase is refunded or revoked. (A receipt that still holds a live purchase
/// keeps its refunded ones: they are answered as `revoked`, never granted.)
public struct RevocationCheck: PurchaseCheck {
    public init() {}
    public func check(_ outcome: AdapterOutcome, _ context: ClaimContext) throws(VerificationError) {
        if context.evidenceKind == .receipt {
            guard !outcome.transactions.isEmpty, outcome.transactions.allSatisfy({ $0.revocationDate != nil }) else { return }
            throw VerificationError(.transactionRevoked, "every purchase in the receipt was refunded or revoked")
        }
        let presented = outcome.presentedTransactionId.flatMap { id in outcome.transactions.first { $0.transactionId == id } }
            ?? (outcome.transactions.count == 1 ? outcome.transactions.first : nil)
        guard let t = presented, let date = t.revocationDate else { return }
        throw VerificationError(.transactionRevoked, "transaction \(ClientExcerpt.of(t.transactionId)) was revoked at \(date)")
    }
}
