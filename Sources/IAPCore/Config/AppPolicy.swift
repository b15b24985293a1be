import Foundation

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
    public var sandboxAccounts: Set<String>
    /// Accept Xcode / LocalTesting data (signed by no Apple server). Never with Production.
    public var allowLocalTestEnvironments: Bool
    public var trustRoots: TrustRoots
    /// The App Store Connect shared secret for `verifyReceipt`.
    public var sharedSecret: SecretReference?
    public var serverAPI: ServerAPICredentials?
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
    /// Thresholds of the cutover verdict (`readiness` in the app file; defaults otherwise).
    public var readiness: Readiness = .standard

    public init(bundleId: String, appAppleId: Int64? = nil, allowedEnvironments: Set<AppStoreEnvironment>,
                sandboxAccounts: Set<String> = [], allowLocalTestEnvironments: Bool = false,
                trustRoots: TrustRoots, sharedSecret: SecretReference? = nil, serverAPI: ServerAPICredentials? = nil,
                productCatalog: [String: Product], routing: Routing, noncePolicy: NoncePolicy,
                familySharingPolicy: FamilySharingPolicy, gracePeriodPolicy: GracePeriodPolicy,
                onlineChecks: Bool, localOnlyJWS: Bool, apiKey: APIKeyReference, webhook: Webhook? = nil) {
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.allowedEnvironments = allowedEnvironments
        self.sandboxAccounts = sandboxAccounts
        self.allowLocalTestEnvironments = allowLocalTestEnvironments
        self.trustRoots = trustRoots
        self.sharedSecret = sharedSecret
        self.serverAPI = serverAPI
        self.productCatalog = productCatalog
        self.routing = routing
        self.noncePolicy = noncePolicy
        self.familySharingPolicy = familySharingPolicy
        self.gracePeriodPolicy = gracePeriodPolicy
        self.onlineChecks = onlineChecks
        self.localOnlyJWS = localOnlyJWS
        self.apiKey = apiKey
        self.webhook = webhook
    }

    public struct Webhook: Sendable, Equatable {
        public var url: String
        /// The HMAC-SHA256 key for the `X-IAPGW-Signature` header.
        public var secret: SecretReference
        public init(url: String, secret: SecretReference) { self.url = url; self.secret = secret }
    }

    /// Whether evidence from `environment` may be accepted at all (sandbox accounts aside).
    public func allows(_ environment: AppStoreEnvironment) -> Bool {
        environment.isLocalTest ? allowLocalTestEnvironments : allowedEnvironments.contains(environment)
    }

    /// Whether this account may present Sandbox evidence, although the app does not allow Sandbox.
    public func allowsSandbox(forAccount account: String) -> Bool {
        allowedEnvironments.contains(.sandbox) || sandboxAccounts.contains(account)
    }

    /// The policy Apple's notifications (V1 and V2 alike, and the receipt a V1 one carries) are
    /// judged by. A notification names no account, so Sandbox is accepted wherever the app takes
    /// Sandbox evidence at all: when it allows Sandbox, or lists sandbox accounts.
    public var forNotifications: AppPolicy {
        var policy = self
        if !sandboxAccounts.isEmpty { policy.allowedEnvironments.insert(.sandbox) }
        return policy
    }

    public struct TrustRoots: Sendable, Equatable {
        /// DER certificates anchoring App Store Server API / StoreKit 2 JWS (Apple Root CA - G3).
        public var jws: [URL]
        /// DER certificates anchoring legacy PKCS#7 receipts (Apple Inc. Root).
        public var receipts: [URL]
        public init(jws: [URL], receipts: [URL]) { self.jws = jws; self.receipts = receipts }
    }

    public struct ServerAPICredentials: Sendable, Equatable {
        public var issuerId: String
        public var keyId: String
        /// The `.p8` key (PEM), as a file or an environment variable.
        public var privateKey: SecretReference
        public init(issuerId: String, keyId: String, privateKey: SecretReference) {
            self.issuerId = issuerId
            self.keyId = keyId
            self.privateKey = privateKey
        }
    }

    public struct Product: Sendable, Equatable {
        public var productId: String
        public var type: TransactionType
        /// The expected price in milliunits of `currency` (Apple's `price`), when the app pins one.
        public var priceMilliunits: Int64?
        public var currency: String?
        public init(productId: String, type: TransactionType, priceMilliunits: Int64? = nil, currency: String? = nil) {
            self.productId = productId
            self.type = type
            self.priceMilliunits = priceMilliunits
            self.currency = currency
        }
    }

    public enum EvidenceKind: String, Sendable, CaseIterable {
        case receipt, transactionId, signedTransaction
    }

    /// How one kind of evidence is verified while an app migrates from receipts to the Server API.
    public enum RoutingMode: String, Sendable, CaseIterable {
        /// `verifyReceipt` only.
        case legacy
        /// App Store Server API only.
        case serverAPI
        /// Legacy answers; the Server API runs beside it and the difference is recorded.
        case shadow
        /// Both run concurrently; the Server API answers and the answer says whether they agreed.
        case compare
        /// The Server API answers; legacy runs beside it for a sample (`cutoverSampleRate`) of requests.
        case cutover

        /// Whether this mode calls the App Store Server API (so needs `serverAPI` credentials).
        public var usesServerAPI: Bool { self != .legacy }
        /// Whether this mode calls `verifyReceipt`.
        public var usesLegacy: Bool { self != .serverAPI }
    }

    public struct Routing: Sendable, Equatable {
        public var receipt: RoutingMode
        public var transactionId: RoutingMode
        public var signedTransaction: RoutingMode
        /// In `cutover`, the share (0...1) of requests also verified through verifyReceipt as a spot check.
        public var cutoverSampleRate: Double
        public init(receipt: RoutingMode, transactionId: RoutingMode, signedTransaction: RoutingMode,
                    cutoverSampleRate: Double = 0) {
            self.cutoverSampleRate = cutoverSampleRate
            self.receipt = receipt
            self.transactionId = transactionId
            self.signedTransaction = signedTransaction
        }
        public subscript(kind: EvidenceKind) -> RoutingMode {
            switch kind {
            case .receipt: receipt
            case .transactionId: transactionId
            case .signedTransaction: signedTransaction
            }
        }
    }

    public struct NoncePolicy: Sendable, Equatable {
        /// Receipts must come with a nonce the gateway issued (replay protection).
        public var requiredForReceipts: Bool
        public var ttlSeconds: Int64
        public init(requiredForReceipts: Bool, ttlSeconds: Int64) {
            self.requiredForReceipts = requiredForReceipts
            self.ttlSeconds = ttlSeconds
        }
    }

    public enum FamilySharingPolicy: String, Sendable, CaseIterable {
        case allow, deny
    }

    public struct GracePeriodPolicy: Sendable, Equatable {
        public var grantDuringGracePeriod: Bool
        public var grantDuringBillingRetry: Bool
        public init(grantDuringGracePeriod: Bool, grantDuringBillingRetry: Bool) {
            self.grantDuringGracePeriod = grantDuringGracePeriod
            self.grantDuringBillingRetry = grantDuringBillingRetry
        }
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
