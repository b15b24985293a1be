import Foundation
import IAPCore

/// Which stored comparisons to read. Every filter is optional; a comparison matches `kind`,
/// `field` and `productId` when at least one of its differences does (`productId` also matches a
/// comparison whose transactions include that product, agreed or not).
public struct ComparisonQuery: Sendable, Equatable {
    public var bundleId: String
    /// Inclusive bounds on `comparedAt` (ms).
    public var from: Int64?
    public var to: Int64?
    public var kind: ComparisonDifference.Kind?
    public var field: String?
    public var productId: String?
    /// A comparison where either path failed with this error code.
    public var failureCode: String?
    public var limit: Int

    public init(bundleId: String, from: Int64? = nil, to: Int64? = nil, kind: ComparisonDifference.Kind? = nil,
                field: String? = nil, productId: String? = nil, failureCode: String? = nil, limit: Int = 100) {
        self.failureCode = failureCode
        self.bundleId = bundleId
        self.from = from
        self.to = to
        self.kind = kind
        self.field = field
        self.productId = productId
        self.limit = limit
    }
}

/// Agreement counts of one app over a time range.
public struct ComparisonCounts: Sendable, Equatable, Codable {
    public var total: Int
    public var agreed: Int
    public init(total: Int, agreed: Int) { self.total = total; self.agreed = agreed }
}

/// Where migration comparisons are kept, with their per-field results.
public protocol ComparisonLedger: Sendable {
    /// Stores one comparison and its differences atomically; storing the same id twice replaces it.
    func recordComparison(_ comparison: PurchaseComparison) async throws(VerificationError)
    /// Matching comparisons, newest first, at most `query.limit` (0...1000), with all their differences.
    func comparisons(_ query: ComparisonQuery) async throws(VerificationError) -> [PurchaseComparison]
    /// Totals for one app within the optional time range (no kind/field/product filter).
    func comparisonCounts(bundleId: String, from: Int64?, to: Int64?) async throws(VerificationError) -> ComparisonCounts
}
