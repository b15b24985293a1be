import AppReceipts
import AppleTrust
import Foundation
import IAPConfig
import IAPCore
import IAPMapping
import Synchronization
import UpstreamHTTP

/// Verifies purchase evidence with the App Store Server API: a transaction id is looked up, a
/// StoreKit 2 JWS is verified locally and (unless the app says local-only) confirmed, and a legacy
/// receipt is verified locally and its purchases fetched with Get Transaction History, without
/// verifyReceipt. Everything Apple returns is verified against the app's pinned roots before use.
public final class ServerAPIAdapter: MappedAdapter {
    public let id = AdapterID.serverAPI

    /// What one app needs, built at first use. Kept with the policy it was built from: another
    /// policy under the same bundle id (tests and tools build variants) gets its own, so a context
    /// never serves one policy's roots or credentials to another.
    struct AppContext: Sendable {
        let policy: AppPolicy
        /// The app's one verifier (`AppVerifiers`), which accepts every environment the app could
        /// ever accept; the claim's `EvidencePolicy` then decides for this one (Sandbox only for App
        /// Review accounts), which a verifier cannot know.
        let verifier: SignedDataVerifier
        let client: Result<AppStoreServerAPIClient, VerificationError>
        let receiptReader: Result<AppReceiptReader, VerificationError>
    }

    public struct Options: Sendable {
        public var retryPolicy = RetryPolicy()
        public var maxPages = 50
        /// Distinct receipt transactions looked up per receipt; more is refused (INPUT_TOO_LARGE).
        public var maxReceiptLookups = 20
        public var secretEnvironment = ProcessInfo.processInfo.environment
        public var now: @Sendable () -> Date = { Date() }
        public var sleep: RetryPolicy.Sleep = RetryPolicy.taskSleep
        /// The per-app JWS verifiers (their clock, OCSP transport and `limits.maxJWSBytes`), which the
        /// gateway shares with notifications; nil builds the adapter's own on `now`.
        public var verifiers: AppVerifiers?

        /// The defaults; the gateway's assembly sets what its configuration decides.
        public init() {}
    }

    public let baseURLs: EnvironmentURLs
    let upstream: UpstreamHTTPClient
    let normalizer: ServerAPINormalizer
    let options: Options
    let logger: Logger
    /// Where `AppContext.verifier` comes from: one verifier and chain cache per app.
    public let verifiers: AppVerifiers
    private let contexts = Mutex<[String: AppContext]>([:])

    public init(upstream: UpstreamHTTPClient, baseURLs: EnvironmentURLs, normalizer: ServerAPINormalizer,
                options: Options = Options(), logger: Logger = .disabled) {
        self.upstream = upstream
        self.baseURLs = baseURLs
        self.normalizer = normalizer
        self.options = options
        self.logger = logger
        self.verifiers = options.verifiers ?? AppVerifiers(now: options.now)
    }

    public var mappingVersion: String { normalizer.mapping.id }

    static let forms: [EvidenceForm] = [.receipt, .transactionId, .signedTransaction, .signedAppTransaction, .appTransactionId]
    public var evidenceForms: [EvidenceForm] { Self.forms }

    public func verify(_ evidence: PurchaseEvidence, for app: AppPolicy, policy: any EvidencePolicy)
        async throws(VerificationError) -> AdapterOutcome {
        let context = try context(for: app)
        var collected = Collected()
        switch evidence.kind {
        case .transactionId:
            try await verifyTransactionId(evidence.value, policy: policy, context, into: &collected)
        case .signedTransaction:
            try await verifySignedTransaction(evidence.value, policy: policy, context, into: &collected)
        case .receipt:
            try await verifyReceipt(evidence.value, policy: policy, context, into: &collected)
        case .signedAppTransaction, .appTransactionId:
            let (environment, appTransaction) = try await verifyAppTransaction(evidence, policy: policy, context)
            return AdapterOutcome(adapter: id, environment: environment, transactions: [], appTransaction: appTransaction,
                                  mappingVersion: mappingVersion)
        default:
            throw VerificationError(.invalidConfiguration, "the Server API adapter does not verify \(evidence.kind) evidence")
        }
        guard let environment = collected.environment else {
            throw VerificationError(.noTransactions, "the evidence carries no purchase")
        }
        return AdapterOutcome(adapter: id, environment: environment, transactions: collected.sortedTransactions,
                              renewals: collected.sortedRenewals, appTransaction: collected.appTransaction,
                              mappingVersion: mappingVersion,
                              presentedTransactionId: collected.presentedTransactionId)
    }

    // MARK: Per-app context

    /// Builds each app's context now (its JWS verifier, its receipt roots read): at load time (the
    /// gateway's start, off the pool), so no request reads a trust-root file.
    public func prepare(_ apps: some Sequence<AppPolicy>) {
        for app in apps { _ = try? context(for: app) }
    }

    func context(for app: AppPolicy) throws(VerificationError) -> AppContext {
        if let cached = contexts.withLock({ $0[app.bundleId] }), cached.policy == app { return cached }
        let made = try makeContext(app)
        contexts.withLock { $0[app.bundleId] = made }
        return made
    }

    private func makeContext(_ app: AppPolicy) throws(VerificationError) -> AppContext {
        let verifier = try verifiers.verifier(for: app)

        let client: Result<AppStoreServerAPIClient, VerificationError>
        if let credentials = app.serverAPI {
            let tokens = LazyServerAPITokenProvider(credentials: credentials, bundleId: app.bundleId,
                                                    environment: options.secretEnvironment, now: options.now)
            client = .success(AppStoreServerAPIClient(
                baseURLs: baseURLs, tokenProvider: tokens, upstream: upstream, retryPolicy: options.retryPolicy,
                logger: logger.with(["bundleId": app.bundleId]), maxPages: options.maxPages, sleep: options.sleep))
        } else {
            client = .failure(VerificationError(.invalidConfiguration,
                                                "\(app.bundleId): serverAPI (issuerId, keyId, privateKey) is not configured"))
        }
        // Built eagerly but kept as a result: an app that never sends receipts needs no receipt roots.
        let reader: Result<AppReceiptReader, VerificationError>
        do throws(VerificationError) {
            reader = .success(try AppReceiptReader(roots: try AppVerifiers.loadRoots(app.trustRoots.receipts, app: app,
                                                                                     what: "trustRoots.receipts")))
        } catch {
            reader = .failure(error)
        }
        return AppContext(policy: app, verifier: verifier, client: client, receiptReader: reader)
    }

    // MARK: Environments to ask

    /// The hosts to ask for this claim: Production when the policy accepts it, then Sandbox when it
    /// accepts that (for a production app, only its App Review accounts).
    static func order(_ policy: any EvidencePolicy, app: AppPolicy) throws(VerificationError) -> ServerAPIEnvironmentOrder {
        switch (policy.accepts(.production), policy.accepts(.sandbox)) {
        case (true, true): return .productionThenSandbox
        case (true, false): return .productionOnly
        case (false, true): return .sandboxOnly
        case (false, false):
            throw VerificationError(.environmentNotAllowed, "\(app.bundleId) allows neither Production nor Sandbox")
        }
    }
}

/// What the verified payloads add up to, deduplicated; every payload must share one environment.
struct Collected {
    var environment: AppStoreEnvironment?
    /// The transaction the evidence named (transaction ID or signed transaction).
    var presentedTransactionId: String?
    var transactions: [String: CanonicalTransaction] = [:]
    var renewals: [String: CanonicalRenewal] = [:]
    /// The app's own purchase, read beside a receipt's purchases (see verifyReceipt).
    var appTransaction: CanonicalAppTransaction?

    mutating func agree(on found: AppStoreEnvironment?) throws(VerificationError) {
        guard let found else { throw VerificationError(.missingField, "payload has no environment") }
        if let environment, environment != found {
            throw VerificationError(.environmentNotAllowed,
                                    "verified payloads disagree on the environment (\(ClientExcerpt.of(environment.rawValue)) and \(ClientExcerpt.of(found.rawValue)))")
        }
        environment = found
    }

    /// Keeps the most recently signed record of each transaction (a later answer knows of refunds).
    mutating func add(_ t: CanonicalTransaction) throws(VerificationError) {
        try agree(on: t.environment)
        if let old = transactions[t.transactionId], (old.signedDate ?? 0) > (t.signedDate ?? 0) { return }
        transactions[t.transactionId] = t
    }

    mutating func add(_ r: CanonicalRenewal) throws(VerificationError) {
        try agree(on: r.environment)
        if let old = renewals[r.originalTransactionId], (old.signedDate ?? 0) > (r.signedDate ?? 0) { return }
        renewals[r.originalTransactionId] = r
    }

    var sortedTransactions: [CanonicalTransaction] {
        transactions.values.sorted { ($0.purchaseDate ?? 0, $0.transactionId) < ($1.purchaseDate ?? 0, $1.transactionId) }
    }

    var sortedRenewals: [CanonicalRenewal] { renewals.values.sorted { $0.originalTransactionId < $1.originalTransactionId } }
}
