import IAPCore
import Ledger

/// How a stored comparison is answered: in full by GET …/comparisons, and as its verdict inside a
/// verify answer in compare mode. Each shape encodes the answer and documents it.
enum ComparisonAnswers {
    static let difference = JSONShape<ComparisonDifference>.object([
        .required("kind", .cases) { $0.kind },
        .required("transactionId", .string) { $0.transactionId },
        .optional("productId", .string) { $0.productId },
        .optional("field", .string) { $0.field },
        .optional("legacyValue", JSONShape<String>.string.described("canonical JSON text; absent when the path lacks it")) {
            $0.legacyValue
        },
        .optional("serverAPIValue", JSONShape<String>.string.described("canonical JSON text; absent when the path lacks it")) {
            $0.serverAPIValue
        },
    ]).named("ComparisonDifference")

    /// What both paths said, compared: the members the verify answer and the stored row share.
    private static let verdictMembers: [JSONMember<PurchaseComparison>] = [
        .required("id", .string) { $0.id },
        .required("agreed", .boolean) { $0.agreed },
        .required("transactionCount", .count) { $0.transactionCount },
        .required("differences", .array(difference)) { $0.differences },
        .optional("legacyMappingVersion", .string) { $0.legacyMappingVersion },
        .optional("serverAPIMappingVersion", .string) { $0.serverAPIMappingVersion },
        .optional("legacyError", .string) { $0.legacyError },
        .optional("serverAPIError", .string) { $0.serverAPIError },
    ]

    /// The comparison as a verify answer carries it in compare mode.
    static let verdict = JSONShape<PurchaseComparison>.object(verdictMembers).named("ComparisonVerdict")

    static let purchase = JSONShape<ComparedPurchase>.object([
        .required("originalTransactionId", .string) { $0.originalTransactionId },
        .required("productId", .string) { $0.productId },
        .optional("productType", .string) { $0.productType },
        .optional("legacyState", .cases) { $0.legacyState },
        .optional("legacyExpiresDate", .integer) { $0.legacyExpiresDate },
        .optional("serverAPIState", .cases) { $0.serverAPIState },
        .optional("serverAPIExpiresDate", .integer) { $0.serverAPIExpiresDate },
        .required("agreed", .boolean) { $0.agreed },
    ]).named("ComparedPurchase")

    /// A stored comparison, as GET …/comparisons lists it.
    static let comparison = JSONShape<PurchaseComparison>.object(verdictMembers + [
        .required("comparedAt", .integer) { $0.comparedAt },
        .required("evidenceKind", .string) { $0.evidenceKind },
        .required("evidenceSHA256", .string) { $0.evidenceSHA256 },
        .required("productIds", .array(.string)) { $0.productIds },
        .optional("account", .string) { $0.account },
        .optional("environment", .string) { $0.environment },
        .optional("appVersion", .string) { $0.appVersion },
        .required("purchases", .array(purchase)) { $0.purchases },
    ]).named("Comparison")

    struct Listed: Sendable {
        let bundleId: String
        let counts: ComparisonCounts
        let comparisons: [PurchaseComparison]
    }

    static let listed = JSONShape<Listed>.object([
        .required("bundleId", .string) { $0.bundleId },
        .required("counts", .object([
            .required("total", .count) { $0.total },
            .required("agreed", .count) { $0.agreed },
        ])) { $0.counts },
        .required("comparisons", .array(comparison)) { $0.comparisons },
    ]).named("Comparisons")
}
