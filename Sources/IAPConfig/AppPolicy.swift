import Foundation
import IAPCore

/// Who presents evidence: an app backend for one of its accounts, or Apple itself (a notification,
/// a retention request, and the receipt a V1 notification carries name no account).
public enum Claimant: Sendable, Equatable {
    case account(String)
    case apple
}

/// Everything the gateway knows about one app: which evidence it accepts, from which environments,
/// verified how, for which products. Loaded from `Config/apps/<bundleId>.plist` or `.xml` (schema:
/// Config/README.md); it holds references to secrets, never secrets.
public struct AppPolicy: Sendable, Equatable {
    public var bundleId: String
    /// Required when Production is allowed: Apple puts it in every production transaction.
    public var appAppleId: Int64?
    /// Production and/or Sandbox. Xcode and LocalTesting are governed by `allowLocalTestEnvironments`.
    public var allowedEnvironments: Set<AppStoreEnvironment>
    /// Accounts allowed to present Sandbox evidence to a production app (App Review).
    public var sandboxAccounts: Set<String> = []
    /// Accept Xcode / LocalTesting data (signed by no Apple server). Never with Production.
    public var allowLocalTestEnvironments = false
    public var trustRoots: TrustRoots
    /// The App Store Connect shared secret for `verifyReceipt`.
    public var sharedSecret: SecretReference?
    public var serverAPI: InAppPurchaseKey?
    /// Keyed by product id.
    public var productCatalog: [String: Product]
    public var routing: Routing
    public var noncePolicy: NoncePolicy
    public var familySharingPolicy: FamilySharingPolicy
    public var gracePeriodPolicy: GracePeriodPolicy
    /// Check certificate revocation (OCSP) online; refuse when it cannot be checked.
    public var onlineChecks: Bool
    /// Trust a verified StoreKit 2 `signedTransaction` without asking Get Transaction Info.
    public var localOnlyJWS: Bool
    /// The app backend's Bearer key.
    public var apiKey: APIKeyReference
    /// Where entitlement changes from notifications are posted (HMAC-SHA256 signed); nil: none.
    public var webhook: Webhook?
    /// Answer CONSUMPTION_REQUEST with these declared values; nil: never answer.
    public var consumptionResponse: ConsumptionResponse? = nil
    /// Tell the App Store (Finish Transaction) that each newly granted purchase was delivered, from
    /// the ledger's finish outbox once the grant is durable; false: the app's StoreKit `finish()` does it.
    public var finishTransactions = false
    /// Products granted to those who bought the app before it went free; nil: none.
    public var grandfathering: Grandfathering? = nil
    /// Thresholds of the cutover verdict (`readiness` in the app file; defaults otherwise).
    public var readiness: Readiness = .standard
    /// The key offers are signed with, when not the Server API's (`offerSigningKey` decides).
    public var offerSigning: InAppPurchaseKey? = nil
    /// The promotional offers the gateway signs, and for whom; none unless listed.
    public var promotionalOffers: [PromotionalOffer] = []
    /// How Retention Messaging realtime requests are answered; none: always `{}` (Apple's default message).
    public var retentionMessages: [RetentionRule] = []

    public struct Webhook: Sendable, Equatable {
        public var url: String
        /// The HMAC-SHA256 key for the `X-IAPGW-Signature` header.
        public var secret: SecretReference
    }

    /// The identity evidence must state for one claimant (`AppIdentity.check` is the rule): this
    /// bundle and app id, from Production and Sandbox as allowed, Sandbox also for the App Review
    /// accounts (`sandboxAccounts`), Xcode / LocalTesting where enabled. Apple's own messages
    /// (notifications, retention requests) name no account: they may come from wherever some claim
    /// may, and the app's one JWS verifier is built with that widest identity.
    public func identity(for claimant: Claimant) -> AppIdentity {
        var environments = allowedEnvironments.filter { !$0.isLocalTest }
        switch claimant {
        case .apple where !sandboxAccounts.isEmpty: environments.insert(.sandbox)
        case .account(let account) where sandboxAccounts.contains(account): environments.insert(.sandbox)
        case .apple, .account: break
        }
        if allowLocalTestEnvironments { environments.formUnion([.xcode, .localTesting]) }
        return AppIdentity(bundleId: bundleId, appAppleId: appAppleId, environments: environments)
    }

    public struct TrustRoots: Sendable, Equatable {
        /// DER certificates anchoring App Store Server API / StoreKit 2 JWS (Apple Root CA - G3).
        public var jws: [URL]
        /// DER certificates anchoring legacy PKCS#7 receipts (Apple Inc. Root).
        public var receipts: [URL]
    }

    /// An In-App Purchase key from App Store Connect: what the Server API's bearer tokens
    /// (`serverAPI`) and signed offers (`offerSigning`) are signed with.
    public struct InAppPurchaseKey: Sendable, Equatable {
        /// Apple's issuer id (the JWT's and the offer JWS's `iss`).
        public var issuerId: String
        public var keyId: String
        /// The `.p8` key (PEM), as a file or an environment variable.
        public var privateKey: SecretReference
        /// When the team's key rotation retires this key (ms since 1970), if it set a date: Apple's
        /// keys carry none (they stay valid until revoked), so this is the date `/metrics` exports
        /// for the expiry alert.
        public var retiresAt: Int64? = nil
    }

    public struct Product: Sendable, Equatable {
        public var productId: String
        public var type: TransactionType
        /// The expected price in milliunits of `currency` (Apple's `price`), when the app pins one.
        public var priceMilliunits: Int64?
        public var currency: String?
    }

    /// One kind of evidence a client presents (open: each adapter declares the kinds it verifies).
    /// Stable strings: they are stored in the audit trail and name routing entries.
    public struct EvidenceKind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }
        public static let receipt = Self(rawValue: "receipt")
        public static let transactionId = Self(rawValue: "transactionId")
        public static let signedTransaction = Self(rawValue: "signedTransaction")
        /// StoreKit 2's `AppTransaction.shared` (JWS): the purchase of the app itself.
        public static let signedAppTransaction = Self(rawValue: "signedAppTransaction")
        /// An appTransactionId (or any transaction id of the customer), read with Get App Transaction Info.
        public static let appTransactionId = Self(rawValue: "appTransactionId")
        /// Evidence of the app's own purchase rather than of an in-app purchase.
        public var isAppTransaction: Bool { self == .signedAppTransaction || self == .appTransactionId }
        /// The kinds an app file's `routing` names (each required there).
        public static let configured: [Self] = [.receipt, .transactionId, .signedTransaction]
    }

    /// Which adapter answers one kind of evidence, and which adapter, if any, runs beside it and is
    /// compared while the app migrates. Names adapter ids (open values: any registered adapter);
    /// the app file's words (`legacy`, `serverAPI`, `shadow`, `compare`, `cutover`) are the presets below.
    public struct RoutingMode: Sendable, Equatable, CustomStringConvertible {
        /// How the compared adapter runs beside the answering one.
        public enum Beside: String, Sendable {
            /// Off the request: the answer never waits; the difference is recorded.
            case shadow
            /// Concurrently: the answer waits for both and carries the comparison.
            case compare
            /// Off the request, for a sample (`cutoverSampleRate`) of requests.
            case cutover
            /// Off the request, every request: a rollout cohort's (the adapter migrated from beside
            /// the one migrated to; `Rollout.insideCohort`).
            case cohort
        }

        /// The adapter whose outcome answers the request.
        public var answering: AdapterID
        /// The adapter run beside it, and how; nil: the answering adapter alone.
        public var compared: (adapter: AdapterID, beside: Beside)? {
            get { comparedAdapter.map { ($0, beside!) } }
            set { comparedAdapter = newValue?.adapter; beside = newValue?.beside }
        }
        private var comparedAdapter: AdapterID?
        private var beside: Beside?

        public init(answering: AdapterID, compared: (adapter: AdapterID, beside: Beside)? = nil) {
            self.answering = answering
            self.compared = compared
        }

        /// `verifyReceipt` only.
        public static let legacy = Self(answering: .verifyReceipt)
        /// App Store Server API only.
        public static let serverAPI = Self(answering: .serverAPI)
        /// Legacy answers; the Server API runs beside it and the difference is recorded.
        public static let shadow = Self(answering: .verifyReceipt, compared: (.serverAPI, .shadow))
        /// Both run concurrently; the Server API answers and the answer says whether they agreed.
        public static let compare = Self(answering: .serverAPI, compared: (.verifyReceipt, .compare))
        /// The Server API answers; legacy runs beside it for a sample (`cutoverSampleRate`) of requests.
        public static let cutover = Self(answering: .serverAPI, compared: (.verifyReceipt, .cutover))

        /// The words an app file's `routing` takes, and what each routes to.
        public static let configWords: [(String, Self)] = [
            ("legacy", .legacy), ("serverAPI", .serverAPI), ("shadow", .shadow), ("compare", .compare), ("cutover", .cutover),
        ]

        /// The two sides of its comparison: the generation migrated from (the comparison's `legacy`
        /// side) and the one migrated to (`serverAPI`). Shadow answers with the first, compare and
        /// cutover with the second; nil: nothing is compared.
        public var generations: (from: AdapterID, to: AdapterID)? {
            guard let (other, beside) = compared else { return nil }
            return beside == .shadow ? (answering, other) : (other, answering)
        }

        /// The adapters this routing runs.
        public var adapters: [AdapterID] { [answering] + (comparedAdapter.map { [$0] } ?? []) }

        /// Whether this routing calls the App Store Server API (so needs `serverAPI` credentials).
        public var usesServerAPI: Bool { adapters.contains(.serverAPI) }

        /// The app file's word for this routing, or the adapter ids it names.
        public var description: String {
            Self.configWords.first { $0.1 == self }?.0
                ?? ([answering.rawValue] + (compared.map { ["\($0.beside.rawValue):\($0.adapter.rawValue)"] } ?? [])).joined(separator: "+")
        }
    }

    public struct Routing: Sendable, Equatable {
        /// Per kind of evidence; a kind without an entry goes to the one adapter that declares it.
        public var modes: [EvidenceKind: RoutingMode]
        /// In `cutover`, the share (0...1) of requests also verified through verifyReceipt as a spot check.
        public var cutoverSampleRate: Double
        /// Receipts in `rollout`: the plan (`receipt` is then how accounts outside the cohort are
        /// answered; `RolloutRouting` picks per account).
        public var rollout: Rollout?
        public init(receipt: RoutingMode, transactionId: RoutingMode, signedTransaction: RoutingMode,
                    cutoverSampleRate: Double = 0) {
            self.cutoverSampleRate = cutoverSampleRate
            modes = [.receipt: receipt, .transactionId: transactionId, .signedTransaction: signedTransaction]
        }
        public init(modes: [EvidenceKind: RoutingMode], cutoverSampleRate: Double = 0) {
            self.modes = modes
            self.cutoverSampleRate = cutoverSampleRate
        }
        public subscript(kind: EvidenceKind) -> RoutingMode? {
            get { modes[kind] }
            set { modes[kind] = newValue }
        }
        public var receipt: RoutingMode {
            get { modes[.receipt] ?? .legacy }
            set { modes[.receipt] = newValue }
        }
    }

    public struct NoncePolicy: Sendable, Equatable {
        /// Receipts must come with a nonce the gateway issued (replay protection).
        public var requiredForReceipts: Bool
        public var ttlSeconds: Int64
    }

    public enum FamilySharingPolicy: String, Sendable, CaseIterable {
        case allow, deny
    }

    public struct GracePeriodPolicy: Sendable, Equatable {
        public var grantDuringGracePeriod: Bool
        public var grantDuringBillingRetry: Bool
    }
}

/// How the gateway recognises the app backend's Bearer key.
public enum APIKeyReference: Sendable, Equatable, CustomStringConvertible {
    /// Lowercase hex SHA-256 of the key: the key itself is nowhere in the configuration.
    case sha256(String)
    /// The key itself, held in an environment variable or a file.
    case secret(SecretReference)

    public var description: String {
        switch self {
        case .sha256(let hex): "sha256:\(hex.prefix(8))…"
        case .secret(let reference): reference.description
        }
    }
}
