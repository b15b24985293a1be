import Adapters
import Foundation
import IAPConfig
import IAPCore
import IAPMapping
import Ledger

/// Runs receipt evidence through both generations under the app's routing mode (shadow, compare,
/// cutover) and keeps each side-by-side verdict in the ledger.
///
/// The secondary path of `shadow` and `cutover` runs on the bounded `shadowWork` queue: the answer
/// never waits for it, and its failure only becomes the comparison's `legacyError` / `serverAPIError`.
public struct MigrationRouter: Sendable {
    /// Shadow comparisons waiting or running at most (`ShadowQueue`).
    public static let defaultShadowLimit = 256

    public let comparator: PurchaseComparator
    let store: any ComparisonLedger
    let now: @Sendable () -> Int64
    let logger: Logger
    /// Decides a cutover spot check: `random() < rate`.
    let random: @Sendable () -> Double
    /// The comparisons the answers do not wait for; drained at shutdown.
    let shadowWork: ShadowQueue
    /// Per-account receipt routing of apps in a rollout; nil: routing is the app file's alone.
    var rollouts: RolloutRouting?

    public init(comparator: PurchaseComparator, store: any ComparisonLedger, logger: Logger = .disabled,
                now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) },
                random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
                shadowLimit: Int = MigrationRouter.defaultShadowLimit, onShadowDropped: @escaping @Sendable () -> Void = {}) {
        self.comparator = comparator
        self.store = store
        self.logger = logger
        self.now = now
        self.random = random
        let log = logger
        shadowWork = ShadowQueue(limit: shadowLimit) {
            // Counted as a lost write by the assembly; the answer it belongs to is unchanged.
            log.warning("shadow_comparison_dropped", ["limit": String(shadowLimit)])
            onShadowDropped()
        }
    }

    /// What the request answers with, plus the comparison when the mode includes it in the answer.
    struct Answer: Sendable {
        var outcome: Result<AdapterOutcome, VerificationError>
        var answeringAdapter: AdapterID
        var comparison: PurchaseComparison?
    }

    /// Whether this evidence under this app's routing runs a compared adapter beside the answering
    /// one (a compared adapter that cannot verify this kind leaves the answering one alone).
    static func applies(to evidence: PurchaseEvidence, app: AppPolicy, adapters: AdapterRegistry) -> Bool {
        guard let compared = app.routing[evidence.kind]?.compared?.adapter else { return false }
        return adapters.adapter(compared)?.canVerify(evidence) == true
    }

    func run(_ evidence: PurchaseEvidence, account: String, app: AppPolicy, adapters: AdapterRegistry,
             evidenceSHA256: String) async throws(VerificationError) -> Answer {
        let app = await rollouts?.route(app, account: account) ?? app
        guard let mode = app.routing[evidence.kind], let (comparedId, beside) = mode.compared,
              let generations = mode.generations else {
            throw VerificationError(.invalidConfiguration, "\(app.bundleId): \(evidence.kind) routing is not a migration mode")
        }
        guard let answering = adapters.adapter(mode.answering), let compared = adapters.adapter(comparedId),
              let legacy = adapters.adapter(generations.from), let serverAPI = adapters.adapter(generations.to),
              answering.canVerify(evidence), compared.canVerify(evidence) else {
            throw VerificationError(.invalidConfiguration, "\(app.bundleId): \(mode) routing needs both adapters")
        }
        switch beside {
        case .compare:
            async let legacyResult = Self.attempt(legacy, evidence, account, app)
            async let serverResult = Self.attempt(serverAPI, evidence, account, app)
            let (l, s) = await (legacyResult, serverResult)
            let comparison = compare(legacy: (legacy, l), serverAPI: (serverAPI, s), app: app, evidence: evidence,
                                     digest: evidenceSHA256, account: account)
            await store(comparison)
            return Answer(outcome: s, answeringAdapter: serverAPI.id, comparison: comparison)
        case .shadow, .cutover, .cohort:
            let primaryResult = await Self.attempt(answering, evidence, account, app)
            if beside != .cutover || random() < app.routing.cutoverSampleRate {
                let router = self
                shadowWork.submit {
                    let secondaryResult = await Self.attempt(compared, evidence, account, app)
                    let (l, s) = beside == .shadow ? (primaryResult, secondaryResult) : (secondaryResult, primaryResult)
                    await router.store(router.compare(legacy: (legacy, l), serverAPI: (serverAPI, s), app: app, evidence: evidence,
                                                      digest: evidenceSHA256, account: account))
                }
            }
            return Answer(outcome: primaryResult, answeringAdapter: answering.id, comparison: nil)
        }
    }

    /// One path's answer as a value, failures included: both paths always run to the end, and
    /// the comparison records whichever way each went (routing and batch compare alike).
    static func attempt(_ adapter: any VerificationAdapter, _ evidence: PurchaseEvidence, _ account: String,
                                _ app: AppPolicy) async -> Result<AdapterOutcome, VerificationError> {
        do {
            return .success(try await adapter.verify(evidence, for: app,
                                                     policy: ClaimPolicy(app: app, claimant: .account(account))))
        } catch {
            return .failure(error)
        }
    }

    /// The one place both paths' results become a stored comparison (routing and batch alike).
    /// `legacy` is the generation migrated from, `serverAPI` the one migrated to (`RoutingMode.generations`),
    /// whichever adapters they are: each with the adapter that produced it.
    func compare(legacy: Side, serverAPI: Side, app: AppPolicy, evidence: PurchaseEvidence, digest: String, account: String,
                 id: String = UUID().uuidString.lowercased(), now: Int64? = nil) -> PurchaseComparison {
        var comparison = comparator.compare(legacy: path(legacy), serverAPI: path(serverAPI),
                                            id: id, bundleId: app.bundleId, evidenceKind: evidence.kind.rawValue,
                                            evidenceSHA256: digest, now: now ?? self.now())
        comparison.describePurchases(legacy: legacy.result, serverAPI: serverAPI.result, account: account, app: app)
        return comparison
    }

    /// One generation's adapter and how its attempt went.
    typealias Side = (adapter: any VerificationAdapter, result: Result<AdapterOutcome, VerificationError>)

    /// A failed path still names its mapping file, where its adapter normalises with one.
    private func path(_ side: Side) -> ComparedPath {
        switch side.result {
        case .success(let o): ComparedPath(transactions: o.transactions, renewals: o.renewals, appTransaction: o.appTransaction,
                                           mappingVersion: o.mappingVersion)
        case .failure(let e): .failed(e.code.rawValue, mappingVersion: (side.adapter as? any MappedAdapter)?.mappingVersion)
        }
    }

    /// A comparison that cannot be stored is logged: it must never take back an answer.
    private func store(_ comparison: PurchaseComparison) async {
        do {
            try await store.recordComparison(comparison)
            logger.info("comparison_recorded", ["bundleId": comparison.bundleId, "agreed": String(comparison.agreed),
                                                "differences": String(comparison.differences.count)])
        } catch {
            logger.error("comparison_not_recorded", ["bundleId": comparison.bundleId, "code": error.code.rawValue])
        }
    }
}
