import Foundation
import IAPConfig
import IAPCore

/// The migration team's view of one app's stored comparisons, and the cutover verdict.
///
/// The verdict (README, "Migration side by side", states the same rule), judged per environment:
/// - evidence both paths refused as junk (`refusedByBothCodes`: malformed, not authentic, too
///   large, another app's) is counted apart and enters no number below;
/// - each purchase chain (`originalTransactionId`) counts once, by its latest comparison: agreed,
///   disagreeing (an unexplained difference on it) or failed (a path failed; explained when the
///   app's policy lists every failing code in `readiness.explainedFailures`);
/// - ready when every criterion holds: at least `minimumPurchaseChains` chains and
///   `minimumAccounts` accounts, comparisons spanning `minimumObservationDays`, every product type
///   of the catalog covered, agreement of at least `agreementThreshold` of the chains, no
///   disagreeing chain, no unexplained failed chain (nor a failed comparison that names no chain),
///   and no account that would lose access at cutover. Every unmet criterion is listed.
/// The app's verdict is its primary environment's (Production when allowed); the other is shown apart.
public struct MigrationReport: Sendable {
    public struct Rate: Sendable, Equatable {
        public var total: Int
        public var agreed: Int
        public var rate: Double { total == 0 ? 0 : Double(agreed) / Double(total) }
        public init(total: Int, agreed: Int) { self.total = total; self.agreed = agreed }
    }

    /// One finding: the primary field of one disagreeing transaction, side by side, with the
    /// differences the same cause produced elsewhere attached (`related`), so one cause is one row.
    public struct SideBySideRow: Sendable, Equatable {
        public var comparisonId: String
        public var comparedAt: Int64
        public var transactionId: String
        public var productId: String?
        public var kind: ComparisonDifference.Kind
        /// The canonical field, or nil when the whole transaction is in one path only.
        public var field: String?
        public var legacyValue: String?
        public var serverAPIValue: String?
        /// Differences of the same comparison that follow from this one (same values on a related field).
        public var related: [ComparisonDifference] = []
    }

    /// Fields whose difference follows from a difference of the primary field with the same values:
    /// another product shows again as the renewal's product and auto-renew product. Any `renewal.X`
    /// with the same values as `X` follows from it too.
    static let consequences: [String: Set<String>] = ["productId": ["renewal.productId", "renewal.autoRenewProductId"]]

    /// A comparison's differences grouped by cause: each primary with its consequences attached.
    static func findings(_ differences: [ComparisonDifference]) -> [(primary: ComparisonDifference, related: [ComparisonDifference])] {
        func follows(_ other: ComparisonDifference, from d: ComparisonDifference) -> Bool {
            guard let field = d.field, let f = other.field, f != field else { return false }
            return consequences[field, default: []].union(["renewal." + field]).contains(f)
                && other.legacyValue == d.legacyValue && other.serverAPIValue == d.serverAPIValue
        }
        let primaries = differences.filter { d in !differences.contains { follows(d, from: $0) } }
        return primaries.map { p in (p, differences.filter { follows($0, from: p) }) }
    }

    /// Comparisons of one product, environment or app version: how many agreed, disagreed, failed.
    public struct Breakdown: Sendable, Equatable {
        /// "product", "environment", "appVersion".
        public var dimension: String
        public var value: String
        public var comparisons = 0
        public var agreed = 0
        public var withFindings = 0
        public var failed = 0
    }

    /// One readiness criterion with its numbers ("87 purchase chains (at least 100)").
    public struct Criterion: Sendable, Equatable {
        public var met: Bool
        public var text: String
    }

    /// One environment's numbers and criteria, over distinct purchase chains.
    public struct EnvironmentVerdict: Sendable, Equatable {
        public var environment: String
        public var chains: Int
        public var agreedChains: Int
        public var disagreeingChains: Int
        public var unexplainedFailedChains: Int
        public var explainedFailedChains: Int
        public var accounts: Int
        public var observedMillis: Int64
        public var criteria: [Criterion]
        public var isReady: Bool { criteria.allSatisfy(\.met) }
        public var unmet: [String] { criteria.filter { !$0.met }.map(\.text) }
    }

    public enum Verdict: Sendable, Equatable {
        case ready
        /// Every unmet criterion, with its numbers.
        case notReady(reasons: [String])

        public var isReady: Bool { self == .ready }
        public var label: String { isReady ? "ready to cut over" : "not ready" }
    }

    /// Failed comparisons of one code on one path (and product): how many, when, and one example.
    public struct FailureClass: Sendable, Equatable {
        public var code: String
        /// "verifyReceipt" or "serverAPI".
        public var path: String
        public var productId: String?
        public var count: Int
        public var firstSeen: Int64
        public var lastSeen: Int64
        public var sampleComparisonId: String
        public var sampleTransactionId: String?
        public var sampleAccount: String?
        /// The policy's reason when it declares this code explainable; nil: it blocks the cutover.
        public var explanation: String?
    }

    /// What a cutover would change for one account's purchase chain (latest comparison).
    public struct ImpactRow: Sendable, Equatable {
        public enum Change: String, Sendable, CaseIterable {
            case losesAccess, gainsAccess, differentExpiry
        }
        public var change: Change
        public var environment: String
        public var account: String?
        public var productId: String
        public var originalTransactionId: String
        /// nil: the chain is absent from that path's answer (`notFound`).
        public var legacyState: Entitlement.State?
        public var serverAPIState: Entitlement.State?
        public var legacyExpiresDate: Int64?
        public var serverAPIExpiresDate: Int64?
        public var comparisonId: String

        /// What every view names a path's state when its answer lacks the chain (a purchase the
        /// Server API does not know): a reader sees "active → notFound", never a blank.
        public static let notFound = "notFound"

        public var legacyStateName: String { legacyState?.rawValue ?? Self.notFound }
        public var serverAPIStateName: String { serverAPIState?.rawValue ?? Self.notFound }

        /// A path's state for plain text (the terminal, the CSV): its name, and its end as UTC ISO-8601.
        static func text(_ name: String, _ expires: Int64?) -> String {
            name + (expires.map { " until \(MigrationReport.isoDate($0))" } ?? "")
        }

        public var legacyText: String { Self.text(legacyStateName, legacyExpiresDate) }
        public var serverAPIText: String { Self.text(serverAPIStateName, serverAPIExpiresDate) }
    }

    /// Both paths refused the evidence itself with one of these: junk, counted apart, never in agreement.
    public static let refusedByBothCodes: Set<String> = Set([
        VerificationError.Code.malformedReceipt, .receiptNotAuthentic, .inputTooLarge, .malformedBase64, .invalidSignature,
        .notAppStoreReceipt, .untrustedRoot, .invalidCertificateChain, .malformedCertificate, .missingAppleOID,
        .bundleIdMismatch, .appAppleIdMismatch,
    ].map(\.rawValue))

    public var bundleId: String
    public var criteria: ReadinessCriteria
    /// The comparisons counted, oldest first ("refused by both" left out).
    public var comparisons: [PurchaseComparison]
    /// Comparisons counted (agreed or not; "refused by both" left out).
    public var overall: Rate
    /// Comparisons with at least one recorded difference.
    public var disagreements: Int
    /// Comparisons where a path failed outright (nothing of it compared).
    public var pathFailures: Int
    /// Comparisons whose evidence both paths refused as junk, by their codes ("LEGACY / SERVER").
    public var refusedByBoth: Int
    public var refusedByBothByCodes: [(codes: String, count: Int)]
    /// Agreement of comparisons per UTC day ("yyyy-MM-dd"), oldest first.
    public var perDay: [(day: String, rate: Rate)]
    /// Per canonical field that differed at least once: transactions (of comparisons where both
    /// paths answered) on which that field agreed. Fields that never differed agree everywhere.
    public var perField: [(field: String, rate: Rate)]
    /// Findings (one per cause) by class, every class listed (zero included), in `Kind.allCases` order.
    public var differencesByClass: [(kind: ComparisonDifference.Kind, count: Int)]
    /// Findings by primary field, most frequent first ("(transaction)" for present-in-one-path-only).
    public var differencesByField: [(field: String, count: Int)]
    public var rows: [SideBySideRow]
    /// Per product, per environment, and per app version where receipts carry it; comparisons counted.
    public var breakdowns: [Breakdown]
    /// Production first, then Sandbox, then any other environment seen.
    public var environments: [EnvironmentVerdict]
    /// Failed comparisons that name no purchase chain (both paths failed, not as junk).
    public var unattributedFailures: Int
    public var failures: [FailureClass]
    /// Losses first, then gains, then different expiries; by product and account.
    public var impact: [ImpactRow]
    public var verdict: Verdict
    /// When the report was built from fewer comparisons than the ledger holds (display cap).
    public var truncated: Bool

    public static let wholeTransaction = "(transaction)"

    public init(bundleId: String, comparisons: [PurchaseComparison], criteria: ReadinessCriteria, truncated: Bool = false) {
        self.bundleId = bundleId
        self.criteria = criteria
        self.truncated = truncated
        let sorted = comparisons.filter { $0.bundleId == bundleId }.sorted { ($0.comparedAt, $0.id) < ($1.comparedAt, $1.id) }
        let junk = sorted.filter(Self.isRefusedByBoth)
        let mine = sorted.filter { !Self.isRefusedByBoth($0) }
        refusedByBoth = junk.count
        self.comparisons = mine
        var junkCodes: [String: Int] = [:]
        for c in junk { junkCodes["\(c.legacyError ?? "") / \(c.serverAPIError ?? "")", default: 0] += 1 }
        refusedByBothByCodes = junkCodes.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { ($0.key, $0.value) }
        overall = Rate(total: mine.count, agreed: mine.filter(\.agreed).count)
        disagreements = mine.filter { !$0.differences.isEmpty }.count
        pathFailures = mine.filter(Self.failed).count

        var days: [String: Rate] = [:]
        for c in mine {
            let day = Self.day(c.comparedAt)
            var r = days[day] ?? Rate(total: 0, agreed: 0)
            r.total += 1
            if c.agreed { r.agreed += 1 }
            days[day] = r
        }
        perDay = days.keys.sorted().map { ($0, days[$0]!) }

        let bothAnswered = mine.filter { !Self.failed($0) }
        let comparedTransactions = bothAnswered.reduce(0) { $0 + $1.transactionCount }
        var transactionsDifferingOnField: [String: Set<String>] = [:]
        for c in bothAnswered {
            for d in c.differences {
                transactionsDifferingOnField[d.field ?? Self.wholeTransaction, default: []].insert("\(c.id)\u{0}\(d.transactionId)")
            }
        }
        perField = transactionsDifferingOnField.keys.sorted().map { field in
            let differing = transactionsDifferingOnField[field]!.count
            let total = max(comparedTransactions, differing)
            return (field, Rate(total: total, agreed: total - differing))
        }

        rows = mine.reversed().flatMap { c in
            Self.findings(c.differences).map { d, related in
                SideBySideRow(comparisonId: c.id, comparedAt: c.comparedAt, transactionId: d.transactionId, productId: d.productId,
                              kind: d.kind, field: d.field, legacyValue: d.legacyValue, serverAPIValue: d.serverAPIValue,
                              related: related)
            }
        }
        let findings = rows
        differencesByClass = ComparisonDifference.Kind.allCases.map { kind in (kind, findings.filter { $0.kind == kind }.count) }
        var byField: [String: Int] = [:]
        for d in findings { byField[d.field ?? Self.wholeTransaction, default: 0] += 1 }
        differencesByField = byField.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { ($0.key, $0.value) }

        failures = Self.failureClasses(mine, explained: criteria.thresholds.explainedFailures)
        breakdowns = Self.breakdowns(mine)

        // The latest comparison of each chain, per environment; failed comparisons naming no chain,
        // per evidence (a later comparison of the same evidence supersedes them).
        var latest: [String: [String: (PurchaseComparison, ComparedPurchase)]] = [:]
        var span: [String: (first: Int64, last: Int64)] = [:]
        var unattributed: [String: PurchaseComparison] = [:]
        for c in mine {
            unattributed[c.evidenceSHA256] = c.purchases.isEmpty && Self.failed(c) ? c : nil
            guard !c.purchases.isEmpty else { continue }
            let environment = c.environment ?? "unknown"
            for p in c.purchases { latest[environment, default: [:]][p.originalTransactionId] = (c, p) }
            let s = span[environment] ?? (c.comparedAt, c.comparedAt)
            span[environment] = (min(s.first, c.comparedAt), max(s.last, c.comparedAt))
        }
        unattributedFailures = unattributed.count

        var impact: [ImpactRow] = []
        var environments: [EnvironmentVerdict] = []
        let order = [AppStoreEnvironment.production.rawValue, AppStoreEnvironment.sandbox.rawValue]
        let names = Set(latest.keys).union([criteria.primaryEnvironment])
        for environment in names.sorted(by: { (order.firstIndex(of: $0) ?? 9, $0) < (order.firstIndex(of: $1) ?? 9, $1) }) {
            let chains = latest[environment] ?? [:]
            let rowsHere = chains.values.compactMap { Self.impact($0.0, $0.1, environment: environment, grace: criteria.gracePeriodPolicy) }
            impact += rowsHere
            environments.append(Self.judge(environment, chains: Array(chains.values), span: span[environment],
                                           unattributedFailures: unattributed.count, losses: rowsHere.filter { $0.change == .losesAccess },
                                           criteria: criteria))
        }
        self.environments = environments
        self.impact = impact.sorted {
            (ImpactRow.Change.allCases.firstIndex(of: $0.change)!, $0.productId, $0.account ?? "", $0.originalTransactionId)
                < (ImpactRow.Change.allCases.firstIndex(of: $1.change)!, $1.productId, $1.account ?? "", $1.originalTransactionId)
        }
        let primary = environments.first { $0.environment == criteria.primaryEnvironment }!
        verdict = primary.isReady ? .ready : .notReady(reasons: primary.unmet)
    }

    /// The environment verdict the app's verdict is.
    public var primary: EnvironmentVerdict { environments.first { $0.environment == criteria.primaryEnvironment }! }

    static func failed(_ c: PurchaseComparison) -> Bool { c.legacyError != nil || c.serverAPIError != nil }

    static func isRefusedByBoth(_ c: PurchaseComparison) -> Bool {
        guard let l = c.legacyError, let s = c.serverAPIError else { return false }
        return refusedByBothCodes.contains(l) && refusedByBothCodes.contains(s)
    }

    /// A failed comparison is explained when the policy explains every code it failed with.
    static func explained(_ c: PurchaseComparison, _ explained: [String: String]) -> Bool {
        [c.legacyError, c.serverAPIError].compactMap { $0 }.allSatisfy { explained[$0] != nil }
    }

    private static func judge(_ environment: String, chains: [(PurchaseComparison, ComparedPurchase)],
                              span: (first: Int64, last: Int64)?, unattributedFailures: Int, losses: [ImpactRow],
                              criteria: ReadinessCriteria) -> EnvironmentVerdict {
        let t = criteria.thresholds
        let explainedCodes = t.explainedFailures
        let agreed = chains.filter { $0.1.agreed }.count
        let failedChains = chains.filter { failed($0.0) }
        let explainedFailed = failedChains.filter { explained($0.0, explainedCodes) }.count
        let unexplainedFailed = failedChains.count - explainedFailed + unattributedFailures
        let disagreeing = chains.filter { !failed($0.0) && !$0.1.agreed }.count
        let accounts = Set(chains.compactMap { $0.0.account }).count
        let observed = span.map { $0.last - $0.first } ?? 0
        let covered = Set(chains.compactMap { $0.1.productType })
        let missingTypes = criteria.productTypes.subtracting(covered).sorted()
        let rate = Rate(total: chains.count, agreed: agreed)
        let lossAccounts = Set(losses.map { $0.account ?? "(unknown)" }).count
        var list: [Criterion] = [
            Criterion(met: chains.count >= t.minimumPurchaseChains,
                      text: "\(chains.count) purchase chain(s) compared (at least \(t.minimumPurchaseChains))"),
            Criterion(met: accounts >= t.minimumAccounts, text: "\(accounts) account(s) (at least \(t.minimumAccounts))"),
            Criterion(met: observed >= Int64(t.minimumObservationDays) * 86_400_000,
                      text: "observed over \(days(observed)) day(s) (at least \(t.minimumObservationDays))"),
            Criterion(met: missingTypes.isEmpty, text: missingTypes.isEmpty
                      ? "every product type of the catalog compared"
                      : "product type(s) not compared yet: \(missingTypes.joined(separator: ", "))"),
            Criterion(met: chains.count > 0 && rate.rate >= t.agreementThreshold,
                      text: "agreement \(percent(rate.rate)) of \(chains.count) purchase chain(s) (at least \(percent(t.agreementThreshold)))"),
            Criterion(met: disagreeing == 0, text: "\(disagreeing) purchase chain(s) with unexplained disagreements (none allowed)"),
            Criterion(met: unexplainedFailed == 0, text: "\(unexplainedFailed) unexplained path failure(s) (none allowed)"
                      + (explainedFailed > 0 ? "; \(explainedFailed) explained by policy" : "")),
            Criterion(met: lossAccounts == 0, text: "\(lossAccounts) account(s) would lose access at cutover (none allowed)"),
        ]
        if chains.isEmpty { list[4].text = "agreement: no purchase chain compared yet" }
        return EnvironmentVerdict(environment: environment, chains: chains.count, agreedChains: agreed,
                                  disagreeingChains: disagreeing, unexplainedFailedChains: unexplainedFailed,
                                  explainedFailedChains: explainedFailed, accounts: accounts, observedMillis: observed,
                                  criteria: list)
    }

    /// What switching to the Server API changes for this chain, when both paths answered and it changes something.
    private static func impact(_ c: PurchaseComparison, _ p: ComparedPurchase, environment: String,
                               grace: AppPolicy.GracePeriodPolicy) -> ImpactRow? {
        guard !failed(c) else { return nil }
        let before = p.legacyState.map { EntitlementAccess.grantsAccess($0, policy: grace) } ?? false
        let after = p.serverAPIState.map { EntitlementAccess.grantsAccess($0, policy: grace) } ?? false
        let change: ImpactRow.Change
        switch (before, after) {
        case (true, false): change = .losesAccess
        case (false, true): change = .gainsAccess
        case (true, true) where p.legacyExpiresDate != p.serverAPIExpiresDate: change = .differentExpiry
        default: return nil
        }
        return ImpactRow(change: change, environment: environment, account: c.account, productId: p.productId,
                         originalTransactionId: p.originalTransactionId, legacyState: p.legacyState,
                         serverAPIState: p.serverAPIState, legacyExpiresDate: p.legacyExpiresDate,
                         serverAPIExpiresDate: p.serverAPIExpiresDate, comparisonId: c.id)
    }
}
