import Foundation
import IAPCore

/// When an app may stop relying on verifyReceipt: at least `minimumComparisons` comparisons, an
/// agreement rate at or above `agreementThreshold`, and not one unexplained disagreement.
public struct ReadinessCriteria: Sendable, Equatable, Codable {
    public var agreementThreshold: Double
    public var minimumComparisons: Int

    public static let standard = ReadinessCriteria(agreementThreshold: 0.995, minimumComparisons: 100)

    public init(agreementThreshold: Double, minimumComparisons: Int) {
        self.agreementThreshold = agreementThreshold
        self.minimumComparisons = minimumComparisons
    }
}

/// The migration team's view of one app's stored comparisons: agreement per day and per field,
/// disagreements by class and by field, each disagreeing purchase side by side, and the verdict.
///
/// Two kinds of "not agreed" are kept apart on purpose: a path that failed outright (Apple
/// unavailable, credentials refused) lowers the agreement rate, since nothing was proven; a
/// recorded difference is an *unexplained disagreement* (declared benign differences never become
/// one) and blocks the cutover whatever the rate.
public struct MigrationReport: Sendable {
    public struct Rate: Sendable, Equatable {
        public var total: Int
        public var agreed: Int
        public var rate: Double { total == 0 ? 0 : Double(agreed) / Double(total) }
        public init(total: Int, agreed: Int) { self.total = total; self.agreed = agreed }
    }

    /// One field of one disagreeing transaction: the side-by-side row.
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
    }

    public enum Verdict: Sendable, Equatable {
        case ready
        case notReady(reason: String)

        public var isReady: Bool { self == .ready }
        public var label: String { isReady ? "ready to cut over" : "not ready" }
    }

    public var bundleId: String
    public var criteria: ReadinessCriteria
    /// Comparisons in the report (agreed or not).
    public var overall: Rate
    /// Comparisons with at least one recorded difference.
    public var disagreements: Int
    /// Comparisons where a path failed outright (nothing of it compared).
    public var pathFailures: Int
    /// Agreement per UTC day ("yyyy-MM-dd"), oldest first.
    public var perDay: [(day: String, rate: Rate)]
    /// Per canonical field that differed at least once: transactions (of comparisons where both
    /// paths answered) on which that field agreed. Fields that never differed agree everywhere.
    public var perField: [(field: String, rate: Rate)]
    /// Differences by class, every class listed (zero included), in `Kind.allCases` order.
    public var differencesByClass: [(kind: ComparisonDifference.Kind, count: Int)]
    /// Differences by field, most frequent first ("(transaction)" for present-in-one-path-only).
    public var differencesByField: [(field: String, count: Int)]
    public var rows: [SideBySideRow]
    public var verdict: Verdict
    /// When the report was built from fewer comparisons than the ledger holds (display cap).
    public var truncated: Bool

    public static let wholeTransaction = "(transaction)"

    public init(bundleId: String, comparisons: [PurchaseComparison], criteria: ReadinessCriteria = .standard,
                truncated: Bool = false) {
        self.bundleId = bundleId
        self.criteria = criteria
        self.truncated = truncated
        let mine = comparisons.filter { $0.bundleId == bundleId }.sorted { ($0.comparedAt, $0.id) < ($1.comparedAt, $1.id) }
        overall = Rate(total: mine.count, agreed: mine.filter(\.agreed).count)
        disagreements = mine.filter { !$0.differences.isEmpty }.count
        pathFailures = mine.filter { $0.legacyError != nil || $0.serverAPIError != nil }.count

        var days: [String: Rate] = [:]
        for c in mine {
            let day = Self.day(c.comparedAt)
            var r = days[day] ?? Rate(total: 0, agreed: 0)
            r.total += 1
            if c.agreed { r.agreed += 1 }
            days[day] = r
        }
        perDay = days.keys.sorted().map { ($0, days[$0]!) }

        let bothAnswered = mine.filter { $0.legacyError == nil && $0.serverAPIError == nil }
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

        let all = mine.flatMap(\.differences)
        differencesByClass = ComparisonDifference.Kind.allCases.map { kind in (kind, all.filter { $0.kind == kind }.count) }
        var byField: [String: Int] = [:]
        for d in all { byField[d.field ?? Self.wholeTransaction, default: 0] += 1 }
        differencesByField = byField.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { ($0.key, $0.value) }

        rows = mine.reversed().flatMap { c in
            c.differences.map { d in
                SideBySideRow(comparisonId: c.id, comparedAt: c.comparedAt, transactionId: d.transactionId, productId: d.productId,
                              kind: d.kind, field: d.field, legacyValue: d.legacyValue, serverAPIValue: d.serverAPIValue)
            }
        }
        verdict = Self.verdict(overall: overall, disagreements: disagreements, criteria: criteria)
    }

    static func verdict(overall: Rate, disagreements: Int, criteria: ReadinessCriteria) -> Verdict {
        if overall.total < criteria.minimumComparisons {
            return .notReady(reason: "\(overall.total) comparison(s); at least \(criteria.minimumComparisons) are needed")
        }
        if disagreements > 0 {
            return .notReady(reason: "\(disagreements) comparison(s) with unexplained disagreements")
        }
        if overall.rate < criteria.agreementThreshold {
            return .notReady(reason: "agreement \(percent(overall.rate)) is below the threshold \(percent(criteria.agreementThreshold))")
        }
        return .ready
    }

    /// "99.5%" style, one decimal, without Foundation's locale.
    static func percent(_ rate: Double) -> String {
        let tenths = Int((rate * 1000).rounded())
        return "\(tenths / 10).\(tenths % 10)%"
    }

    static func day(_ millis: Int64) -> String {
        let date = Date(timeIntervalSince1970: TimeInterval(millis) / 1000)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day], from: date)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(c.year ?? 1970)-\(two(c.month ?? 1))-\(two(c.day ?? 1))"
    }
}
