import IAPConfig
import IAPCore

/// The purchase evidence an app backend forwards for one account: its kind, the text of the
/// request member its form names, and the companion members sent with it.
public struct PurchaseEvidence: Sendable, Equatable {
    public var kind: AppPolicy.EvidenceKind
    /// The evidence as the client sent it (a receipt's base64, a transaction id, a JWS, …).
    public var value: String
    /// Companion members by name (a receipt's `nonce`); only those its form lists.
    public var companions: [String: String]

    public init(kind: AppPolicy.EvidenceKind, value: String, companions: [String: String] = [:]) {
        self.kind = kind
        self.value = value
        self.companions = companions
    }

    /// A base64 PKCS#7 app receipt from an old app version, with the nonce the gateway issued for it.
    public static func appReceipt(base64: String, nonce: String?) -> Self {
        Self(kind: .receipt, value: base64, companions: nonce.map { ["nonce": $0] } ?? [:])
    }
    /// A transaction ID from a new app version, to look up with the App Store Server API.
    public static func transactionId(_ id: String) -> Self { Self(kind: .transactionId, value: id) }
    /// A StoreKit 2 `jwsRepresentation`.
    public static func signedTransaction(_ jws: String) -> Self { Self(kind: .signedTransaction, value: jws) }

    /// The nonce the gateway issued for this evidence, when it came with one.
    public var nonce: String? { companions["nonce"] }
}

/// How one kind of evidence comes in a verify request: the body member that carries it and the
/// members that may come with it. Declared by the adapters that verify it; the verify route's
/// accepted body members, its reading of the body and its OpenAPI schema all follow from these.
public struct EvidenceForm: Sendable {
    public var kind: AppPolicy.EvidenceKind
    /// The request member holding the evidence (a string).
    public var member: String
    /// Optional string members allowed only beside `member`.
    public var companions: [String]
    /// One line for the OpenAPI document.
    public var summary: String
    /// The step this kind takes before any adapter verifies it (a receipt's nonce); nil: none.
    public var checkIn: (any EvidenceCheckIn)?
    /// What `member` must look like before anything reads it (a JSON Schema; the adapter refuses
    /// any other value with 400, so the API document states it).
    public var memberSchema: JSONValue

    public init(kind: AppPolicy.EvidenceKind, member: String, companions: [String] = [], summary: String,
                memberSchema: JSONValue = .object(["type": "string", "minLength": .int(1)]),
                checkIn: (any EvidenceCheckIn)? = nil) {
        self.kind = kind
        self.member = member
        self.memberSchema = memberSchema
        self.companions = companions
        self.summary = summary
        self.checkIn = checkIn
    }

    // `.receipt` is the legacy adapter's (Legacy/ReceiptSteps.swift), with its nonce step.
    public static let transactionId = Self(kind: .transactionId, member: "transactionId",
                                           summary: "a transaction ID, looked up with the App Store Server API",
                                           memberSchema: transactionIdSchema)
    public static let signedTransaction = Self(kind: .signedTransaction, member: "signedTransaction",
                                               summary: "a StoreKit 2 signed transaction (JWS)", memberSchema: compactJWSSchema)
    public static let signedAppTransaction = Self(kind: .signedAppTransaction, member: "signedAppTransaction",
                                                  summary: "StoreKit 2's AppTransaction.shared (JWS): the app's own purchase, for grandfathering",
                                                  memberSchema: compactJWSSchema)
    public static let appTransactionId = Self(kind: .appTransactionId, member: "appTransactionId",
                                              summary: "an appTransactionId, read with Get App Transaction Info (grandfathering)",
                                              memberSchema: transactionIdSchema)

    /// A transaction or app transaction id as the Server API client takes it (`checkTransactionId`).
    static let transactionIdSchema: JSONValue = .object(["type": "string", "pattern": .string(AppStoreServerAPIClient.transactionIdPattern)])
    /// A compact JWS: three base64url segments (what the JWS reader splits before anything else).
    public static let compactJWSSchema: JSONValue = .object(["type": "string", "pattern": "^[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+$"])
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
    /// Steps the adapter asks for once the claim is stored (verifyReceipt: keep the newest receipt).
    public var followUps: [any ClaimFollowUp]
    /// The one transaction the evidence names (a transaction ID or a signed transaction), as
    /// opposed to the rest of its chain found beside it; nil for receipts.
    public var presentedTransactionId: String?

    public init(adapter: AdapterID, environment: AppStoreEnvironment, transactions: [CanonicalTransaction],
                renewals: [CanonicalRenewal] = [], appTransaction: CanonicalAppTransaction? = nil,
                mappingVersion: String, followUps: [any ClaimFollowUp] = [], presentedTransactionId: String? = nil) {
        self.presentedTransactionId = presentedTransactionId
        self.adapter = adapter
        self.environment = environment
        self.transactions = transactions
        self.renewals = renewals
        self.appTransaction = appTransaction
        self.mappingVersion = mappingVersion
        self.followUps = followUps
    }
}

/// The gateway's decisions an adapter needs while it works: which environments it may ask Apple
/// about, and whether what it has read is refused anyway. Implemented once, by the gateway's
/// `ClaimPolicy`, which holds what an adapter read (`EvidenceIdentity`: exactly as the evidence
/// states it) to the claim's identity with the one rule (`AppIdentity.check`); an adapter never
/// decides environment, bundle or app id itself, it asks here before it acts, so a refusal costs no
/// call to Apple.
public protocol EvidencePolicy: Sendable {
    /// Whether this claim may be answered from `environment` (the hosts to ask, the redirects to follow).
    func accepts(_ environment: AppStoreEnvironment) -> Bool
    /// Throws the refusal the purchase checks give evidence of this identity.
    func admit(_ identity: EvidenceIdentity) throws(VerificationError)
}

/// One way of turning purchase evidence into canonical facts (the plugin protocol).
///
/// An adapter verifies and normalises; it never binds accounts, grants anything, touches the
/// ledger or decides policy (`EvidencePolicy` does). A new source of evidence is one new type
/// conforming to this, its `AdapterFactory`, and one element in the gateway's list of factories.
public protocol VerificationAdapter: Sendable {
    var id: AdapterID { get }
    /// The kinds of evidence this adapter verifies, and the request members they come from.
    var evidenceForms: [EvidenceForm] { get }
    /// `app` says how to reach Apple for this app (credentials, trust roots, endpoints);
    /// `policy` decides what may be accepted.
    func verify(_ evidence: PurchaseEvidence, for app: AppPolicy, policy: any EvidencePolicy) async throws(VerificationError)
        -> AdapterOutcome
}

extension VerificationAdapter {
    public func canVerify(_ evidence: PurchaseEvidence) -> Bool { evidenceForms.contains { $0.kind == evidence.kind } }
}

/// An adapter that normalises with a mapping file: a comparison names the file even for a path that
/// failed before producing records.
public protocol MappedAdapter: VerificationAdapter {
    /// The mapping file's id, e.g. "verifyReceipt/v1".
    var mappingVersion: String { get }
}

/// The adapters a gateway knows, by id.
public struct AdapterRegistry: Sendable {
    private var adapters: [AdapterID: any VerificationAdapter] = [:]
    /// Every kind of evidence some registered adapter verifies, once each (by kind), in a stable
    /// order: what the verify route accepts. Kept up to date by `register`, because every verify
    /// request reads it (rebuilt per read, it was ~1.5% of a re-claim's CPU).
    public private(set) var evidenceForms: [EvidenceForm] = []

    public init(_ adapters: [any VerificationAdapter] = []) {
        for a in adapters { register(a) }
    }

    /// Two adapters that verify one kind must read it the same way: the same member and companions,
    /// and the same step before verification (so routing can never skip a receipt's nonce).
    public mutating func register(_ adapter: any VerificationAdapter) {
        for form in adapter.evidenceForms {
            guard let known = self.form(of: form.kind) else { continue }
            precondition(known.member == form.member && known.companions == form.companions
                         && (known.checkIn == nil) == (form.checkIn == nil),
                         "adapter \(adapter.id) declares \(form.kind) evidence unlike the adapters registered before it")
        }
        adapters[adapter.id] = adapter
        var seen = Set<AppPolicy.EvidenceKind>()
        evidenceForms = ids.flatMap { adapters[$0]!.evidenceForms }.filter { seen.insert($0.kind).inserted }
            .sorted { $0.member < $1.member }
    }

    public func adapter(_ id: AdapterID) -> (any VerificationAdapter)? { adapters[id] }

    public var ids: [AdapterID] { adapters.keys.sorted { $0.rawValue < $1.rawValue } }

    /// The form of one kind of evidence, as the registered adapters declare it.
    public func form(of kind: AppPolicy.EvidenceKind) -> EvidenceForm? { evidenceForms.first { $0.kind == kind } }

    /// The adapter that answers this evidence: the one the app's routing names for its kind (a
    /// compared adapter then runs beside it, `MigrationRouter`), or, for a kind the routing does not
    /// name, the one adapter that verifies it.
    public func primary(for evidence: PurchaseEvidence, app: AppPolicy) throws(VerificationError)
        -> any VerificationAdapter {
        let id: AdapterID
        if let mode = app.routing[evidence.kind] {
            id = mode.answering
        } else {
            let able = ids.filter { adapters[$0]!.canVerify(evidence) }
            guard able.count == 1 else {
                throw VerificationError(.invalidConfiguration,
                                        "\(app.bundleId): routing names no adapter for \(evidence.kind) evidence and \(able.count) verify it")
            }
            id = able[0]
        }
        guard let adapter = adapters[id], adapter.canVerify(evidence) else {
            throw VerificationError(.invalidConfiguration,
                                    "\(app.bundleId): no adapter \(id) for \(evidence.kind) evidence")
        }
        return adapter
    }
}
