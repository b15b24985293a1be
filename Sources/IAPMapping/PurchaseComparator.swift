import IAPCore

/// What one verification path said about one piece of evidence, in canonical form: its records
/// and the mapping file that produced them, or the error code it failed with.
public struct ComparedPath: Sendable {
    public var transactions: [CanonicalTransaction]
    public var renewals: [CanonicalRenewal]
    /// The app's own purchase as this path states it (a receipt's app-level fields, an AppTransaction).
    public var appTransaction: CanonicalAppTransaction?
    /// "verifyReceipt/v1", "serverAPI/v1"; nil when the path failed before producing records.
    public var mappingVersion: String?
    /// The path failed outright: nothing of it is compared.
    public var errorCode: String?

    public init(transactions: [CanonicalTransaction], renewals: [CanonicalRenewal] = [],
                appTransaction: CanonicalAppTransaction? = nil, mappingVersion: String?) {
        self.transactions = transactions
        self.renewals = renewals
        self.appTransaction = appTransaction
        self.mappingVersion = mappingVersion
        self.errorCode = nil
    }

    public static func failed(_ code: String, mappingVersion: String? = nil) -> ComparedPath {
        var path = ComparedPath(transactions: [], mappingVersion: mappingVersion)
        path.errorCode = code
        return path
    }
}

/// The canonical fields a comparison never counts as disagreements, per record target: the union
/// of what the mapping files of BOTH generations declare as `knownDifferences` (or per-rule
/// `knownDifference`), so either side can explain a field it fills differently.
public struct KnownDifferences: Sendable, Equatable {
    public var transaction: Set<String>
    public var renewal: Set<String>
    public var appTransaction: Set<String>

    public init(transaction: Set<String> = [], renewal: Set<String> = [], appTransaction: Set<String> = []) {
        self.transaction = transaction
        self.renewal = renewal
        self.appTransaction = appTransaction
    }

    public init(mappingFiles: [MappingFile]) {
        var transaction: Set<String> = []
        var renewal: Set<String> = []
        var appTransaction: Set<String> = []
        for file in mappingFiles {
            for kind in file.kindNames {
                let fields = file.knownDifferences(kind: kind).keys
                switch file.target(ofKind: kind) {
                case .transaction?: transaction.formUnion(fields)
                case .renewal?: renewal.formUnion(fields)
                case .appTransaction?: appTransaction.formUnion(fields)
                default: break
                }
            }
        }
        self.init(transaction: transaction, renewal: renewal, appTransaction: appTransaction)
    }
}

/// The pure diff of two paths' canonical answers, matched by `transactionId` (renewals by
/// `originalTransactionId`). No I/O, no clock of its own: `now` decides derived entitlement states.
///
/// Classes, chosen so one cause is reported once:
/// - a transaction in one path only: `onlyInLegacy` / `onlyInServerAPI`;
/// - derived states differ (refunded vs active, ...): `entitlementMismatch` (field "entitlementState"),
///   and then the revocation fields are not reported again as field mismatches; a state difference
///   that is only the consequence of different expiry dates is reported as the `expiryMismatch` alone;
/// - `expiresDate` differs: `expiryMismatch`;
/// - any other canonical field differs: `fieldMismatch` (renewal fields as "renewal.<field>");
/// - the app's own purchase, where both paths state it: the facts grandfathering decides on
///   (`appTransaction.originalApplicationVersion`, `appTransaction.originalPurchaseDate`) as
///   `fieldMismatch` under the transaction id "appTransaction".
/// `source` and `mappingVersion` are never compared; known differences are never reported.
public struct PurchaseComparator: Sendable {
    public static let neverCompared: Set<String> = ["source", "mappingVersion"]
    public let knownDifferences: KnownDifferences

    public init(knownDifferences: KnownDifferences) {
        self.knownDifferences = knownDifferences
    }

    public init(mappingFiles: [MappingFile]) {
        self.init(knownDifferences: KnownDifferences(mappingFiles: mappingFiles))
    }

    public func compare(legacy: ComparedPath, serverAPI: ComparedPath, id: String, bundleId: String,
                        evidenceKind: String, evidenceSHA256: String, now: Int64) -> PurchaseComparison {
        let (legacy, serverAPI) = (Self.answered(legacy, other: serverAPI), Self.answered(serverAPI, other: legacy))
        var comparison = PurchaseComparison(
            id: id, bundleId: bundleId, comparedAt: now, evidenceKind: evidenceKind, evidenceSHA256: evidenceSHA256,
            legacyMappingVersion: legacy.mappingVersion, serverAPIMappingVersion: serverAPI.mappingVersion,
            transactionCount: 0, differences: [], legacyError: legacy.errorCode, serverAPIError: serverAPI.errorCode,
            productIds: Set((legacy.transactions + serverAPI.transactions).map(\.productId)).sorted())
        guard legacy.errorCode == nil, serverAPI.errorCode == nil else {
            comparison.transactionCount = Set((legacy.transactions + serverAPI.transactions).map(\.transactionId)).count
            return comparison
        }
        let left = Self.byId(legacy.transactions)
        let right = Self.byId(serverAPI.transactions)
        let leftRenewals = Self.renewalsByChain(legacy.renewals)
        let rightRenewals = Self.renewalsByChain(serverAPI.renewals)
        let ids = Set(left.keys).union(right.keys).sorted()
        comparison.transactionCount = ids.count
        var differences: [ComparisonDifference] = []
        for id in ids {
            switch (left[id], right[id]) {
            case (let l?, nil):
                differences.append(.init(kind: .onlyInLegacy, transactionId: id, productId: l.productId, field: nil,
                                         legacyValue: l.jsonValue.jsonText, serverAPIValue: nil))
            case (nil, let r?):
                differences.append(.init(kind: .onlyInServerAPI, transactionId: id, productId: r.productId, field: nil,
                                         legacyValue: nil, serverAPIValue: r.jsonValue.jsonText))
            case (let l?, let r?):
                let chain = l.originalTransactionId ?? l.transactionId
                differences += transactionDifferences(l, r, leftRenewal: leftRenewals[chain],
                                                      rightRenewal: rightRenewals[r.originalTransactionId ?? r.transactionId],
                                                      now: now)
            case (nil, nil):
                break
            }
        }
        differences += renewalDifferences(leftRenewals, rightRenewals, productIds: left.merging(right) { a, _ in a })
        differences += appTransactionDifferences(legacy.appTransaction, serverAPI.appTransaction)
        comparison.differences = differences
        return comparison
    }

    /// A path that found none of the purchases (TRANSACTION_NOT_FOUND: Apple knows no such
    /// transaction) while the other path answered has answered too: with nothing, so each of the
    /// other path's transactions is reported as present there only, not hidden as a path failure.
    static func answered(_ path: ComparedPath, other: ComparedPath) -> ComparedPath {
        guard path.errorCode == VerificationError.Code.transactionNotFound.rawValue, other.errorCode == nil else { return path }
        return ComparedPath(transactions: [], mappingVersion: path.mappingVersion)
    }

    /// The app-level facts grandfathering reads, compared only when both paths state the app's purchase.
    static let comparedAppFields = ["originalApplicationVersion", "originalPurchaseDate"]

    private func appTransactionDifferences(_ l: CanonicalAppTransaction?, _ r: CanonicalAppTransaction?) -> [ComparisonDifference] {
        guard let l = l?.jsonValue.objectValue, let r = r?.jsonValue.objectValue else { return [] }
        return Self.comparedAppFields.filter { !knownDifferences.appTransaction.contains($0) && l[$0] != r[$0] }.map {
            .init(kind: .fieldMismatch, transactionId: "appTransaction", productId: nil, field: "appTransaction.\($0)",
                  legacyValue: l[$0]?.jsonText, serverAPIValue: r[$0]?.jsonText)
        }
    }

    private func transactionDifferences(_ l: CanonicalTransaction, _ r: CanonicalTransaction,
                                        leftRenewal: CanonicalRenewal?, rightRenewal: CanonicalRenewal?,
                                        now: Int64) -> [ComparisonDifference] {
        var out: [ComparisonDifference] = []
        let productId = l.productId
        let known = knownDifferences.transaction
        // A legacy receipt states only a subscription's type; the state is derived from the type
        // either path states, or a consumable would differ by what the receipt cannot say.
        var (typedLeft, typedRight) = (l, r)
        typedLeft.type = l.type ?? r.type
        typedRight.type = r.type ?? l.type
        let lState = EntitlementAccess.state(of: typedLeft, renewal: leftRenewal, now: now)
        let rState = EntitlementAccess.state(of: typedRight, renewal: rightRenewal, now: now)
        let expiryDiffers = l.expiresDate != r.expiresDate && !known.contains("expiresDate")
        let revocationDiffers = (l.revocationDate == nil) != (r.revocationDate == nil)
        let stateDiffers = lState != rState && (revocationDiffers || !expiryDiffers)
        if stateDiffers {
            out.append(.init(kind: .entitlementMismatch, transactionId: l.transactionId, productId: productId,
                             field: "entitlementState", legacyValue: JSONValue.string(lState.rawValue).jsonText,
                             serverAPIValue: JSONValue.string(rState.rawValue).jsonText))
        }
        if expiryDiffers {
            out.append(.init(kind: .expiryMismatch, transactionId: l.transactionId, productId: productId,
                             field: "expiresDate", legacyValue: l.expiresDate.map { JSONValue.int($0).jsonText },
                             serverAPIValue: r.expiresDate.map { JSONValue.int($0).jsonText }))
        }
        var skip = Self.neverCompared.union(known).union(["expiresDate"])
        if stateDiffers { skip.formUnion(["revocationDate", "revocationReason"]) }
        out += Self.fieldDifferences(l.jsonValue, r.jsonValue, skipping: skip, prefix: "",
                                     transactionId: l.transactionId, productId: productId)
        return out
    }

    private func renewalDifferences(_ left: [String: CanonicalRenewal], _ right: [String: CanonicalRenewal],
                                    productIds: [String: CanonicalTransaction]) -> [ComparisonDifference] {
        // A renewal only one path carries is not a disagreement by itself: legacy carries pending
        // renewal info only for receipts that have subscriptions, and its effect on entitlement
        // states is already compared per transaction.
        var out: [ComparisonDifference] = []
        for chain in Set(left.keys).intersection(right.keys).sorted() {
            let l = left[chain]!, r = right[chain]!
            out += Self.fieldDifferences(l.jsonValue, r.jsonValue,
                                         skipping: Self.neverCompared.union(knownDifferences.renewal),
                                         prefix: "renewal.", transactionId: chain,
                                         productId: l.productId ?? r.productId ?? productIds[chain]?.productId)
        }
        return out
    }

    private static func fieldDifferences(_ l: JSONValue, _ r: JSONValue, skipping: Set<String>, prefix: String,
                                         transactionId: String, productId: String?) -> [ComparisonDifference] {
        let lo = l.objectValue ?? [:], ro = r.objectValue ?? [:]
        return Set(lo.keys).union(ro.keys).subtracting(skipping).sorted().compactMap { field in
            guard lo[field] != ro[field] else { return nil }
            return ComparisonDifference(kind: .fieldMismatch, transactionId: transactionId, productId: productId,
                                        field: prefix + field, legacyValue: lo[field]?.jsonText,
                                        serverAPIValue: ro[field]?.jsonText)
        }
    }

    private static func byId(_ transactions: [CanonicalTransaction]) -> [String: CanonicalTransaction] {
        Dictionary(transactions.map { ($0.transactionId, $0) }, uniquingKeysWith: { a, _ in a })
    }

    private static func renewalsByChain(_ renewals: [CanonicalRenewal]) -> [String: CanonicalRenewal] {
        Dictionary(renewals.map { ($0.originalTransactionId, $0) }, uniquingKeysWith: { a, _ in a })
    }
}
