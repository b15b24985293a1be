import IAPCore

/// The purchase evidence an app backend forwards for one account.
public enum PurchaseEvidence: Sendable, Equatable {
    /// A base64 PKCS#7 app receipt from an old app version, with the nonce the gateway issued for it.
    case appReceipt(base64: String, nonce: String?)
    /// A transaction ID from a new app version, to look up with the App Store Server API.
    case transactionId(String)
    /// A StoreKit 2 `jwsRepresentation`.
    case signedTransaction(String)

    public var kind: AppPolicy.EvidenceKind {
        switch self {
        case .appReceipt: .receipt
        case .transactionId: .transactionId
        case .signedTransaction: .signedTransaction
        }
    }
}

/// Which adapter produced a fact. Stable strings: they are stored with every canonical record.
public struct AdapterID: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public static let verifyReceipt = AdapterID(rawValue: "verifyReceipt")
    public static let serverAPI = AdapterID(rawValue: "serverAPI")
}

/// What an adapter found: canonical facts only. Binding accounts and granting happen after it,
/// once, for every adapter.
public struct AdapterOutcome: Sendable {
    public var adapter: AdapterID
    public var environment: AppStoreEnvironment
    public var transactions: [CanonicalTransaction]
    public var renewals: [CanonicalRenewal]
    public var appTransaction: CanonicalAppTransaction?
    /// The mapping file that produced the records, e.g. "verifyReceipt/v1".
    public var mappingVersion: String
    /// The newest base64 receipt Apple returned (legacy path), kept sealed for re-verification.
    public var latestReceipt: String?
    /// The nonce Apple echoed back (`request_data`), when the evidence carried one.
    public var echoedNonce: String?
    /// The one transaction the evidence names (a transaction ID or a signed transaction), as
    /// opposed to the rest of its chain found beside it; nil for receipts.
    public var presentedTransactionId: String?

    public init(adapter: AdapterID, environment: AppStoreEnvironment, transactions: [CanonicalTransaction],
                renewals: [CanonicalRenewal] = [], appTransaction: CanonicalAppTransaction? = nil,
                mappingVersion: String, latestReceipt: String? = nil, echoedNonce: String? = nil,
                presentedTransactionId: String? = nil) {
        self.presentedTransactionId = presentedTransactionId
        self.adapter = adapter
        self.environment = environment
        self.transactions = transactions
        self.renewals = renewals
        self.appTransaction = appTransaction
        self.mappingVersion = mappingVersion
        self.latestReceipt = latestReceipt
        self.echoedNonce = echoedNonce
    }
}

/// One way of turning purchase evidence into canonical facts (the plugin protocol).
///
/// An adapter verifies and normalises; it never binds accounts, grants anything or touches the
/// ledger. A new source of evidence is one new type conforming to this and one registration line.
public protocol VerificationAdapter: Sendable {
    var id: AdapterID { get }
    func canVerify(_ evidence: PurchaseEvidence) -> Bool
    /// `account` is the claiming account: adapters use it only where Apple's rules depend on it
    /// (sandbox fallback allowed only for the app's App Review accounts).
    func verify(_ evidence: PurchaseEvidence, account: String, for app: AppPolicy) async throws(VerificationError)
        -> AdapterOutcome
}

/// The adapters a gateway knows, by id.
public struct AdapterRegistry: Sendable {
    private var adapters: [AdapterID: any VerificationAdapter] = [:]

    public init(_ adapters: [any VerificationAdapter] = []) {
        for a in adapters { register(a) }
    }

    public mutating func register(_ adapter: any VerificationAdapter) {
        adapters[adapter.id] = adapter
    }

    public func adapter(_ id: AdapterID) -> (any VerificationAdapter)? { adapters[id] }

    public var ids: [AdapterID] { adapters.keys.sorted { $0.rawValue < $1.rawValue } }

    /// The adapter that answers this evidence under the app's routing mode. Shadow and compare
    /// modes name the answering adapter here; `MigrationRouter` runs the other beside it and
    /// stores the comparison.
    public func primary(for evidence: PurchaseEvidence, app: AppPolicy) throws(VerificationError)
        -> any VerificationAdapter {
        let id: AdapterID = app.routing[evidence.kind].usesLegacyAsPrimary ? .verifyReceipt : .serverAPI
        guard let adapter = adapters[id], adapter.canVerify(evidence) else {
            throw VerificationError(.invalidConfiguration,
                                    "\(app.bundleId): no adapter \(id) for \(evidence.kind) evidence")
        }
        return adapter
    }
}

extension AppPolicy.RoutingMode {
    /// legacy and shadow answer with verifyReceipt; serverAPI, compare and cutover with the Server API.
    public var usesLegacyAsPrimary: Bool { self == .legacy || self == .shadow }
}
