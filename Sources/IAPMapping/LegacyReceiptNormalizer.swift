import IAPCore

/// Everything a legacy `verifyReceipt` response says, in canonical form.
public struct LegacyNormalized: Hashable, Sendable {
    /// Apple's `status` (0 valid; 21000–21010, 21100–21199 refusals). Not judged here: the adapter does.
    public var status: Int64
    public var environment: AppStoreEnvironment?
    public var isRetryable: Bool?
    /// From `receipt`; nil when the response has none (a refusal status).
    public var appTransaction: CanonicalAppTransaction?
    /// `latest_receipt_info` plus the `receipt.in_app` entries it does not already hold, one per
    /// transactionId, ordered by purchaseDate then transactionId.
    public var transactions: [CanonicalTransaction]
    /// From `pending_renewal_info`, in Apple's order.
    public var renewals: [CanonicalRenewal]
    /// Input fields the mapping file does not declare, as "kind.field" (e.g. "in_app.new_field").
    public var unmappedFields: [String]
    public var source: String
    public var mappingVersion: String
}

/// Normalises a `verifyReceipt` JSON response with a mapping file of source "verifyReceipt".
///
/// De-duplication: Apple repeats a transaction in `receipt.in_app` and `latest_receipt_info`;
/// `latest_receipt_info` is the fresher view (a refund's cancellation appears there, and with
/// `exclude-old-transactions` `in_app` may be stale), so its entry wins. `in_app` contributes the
/// transactions `latest_receipt_info` lacks (non-consumables, consumables, non-renewing
/// subscriptions). Within one list the first entry for a transactionId wins.
public struct LegacyReceiptNormalizer: Sendable {
    public static let source = "verifyReceipt"
    public let mapping: MappingFile
    private let response: CompiledKind
    private let receipt: CompiledKind
    private let inApp: CompiledKind
    private let pendingRenewal: CompiledKind

    public init(_ mapping: MappingFile) throws(VerificationError) {
        try mapping.requireSource(Self.source)
        self.mapping = mapping
        response = try mapping.requireKind("response", target: .response)
        receipt = try mapping.requireKind("receipt", target: .appTransaction)
        inApp = try mapping.requireKind("in_app", target: .transaction)
        pendingRenewal = try mapping.requireKind("pending_renewal_info", target: .renewal)
        // The normaliser walks Apple's structure by these names; the file must declare them so.
        for (kind, field, nestedKind) in [(response, "receipt", "receipt"), (response, "latest_receipt_info", "in_app"),
                                          (response, "pending_renewal_info", "pending_renewal_info"),
                                          (receipt, "in_app", "in_app")]
        where kind.nested[field] != nestedKind {
            throw VerificationError(.invalidMapping,
                                    "\(mapping.file): records.\(kind.name) must declare {\"from\": \"\(field)\", \"nested\": \"\(nestedKind)\"}")
        }
    }

    public func normalize(verifyReceiptResponse json: JSONValue) throws(VerificationError) -> LegacyNormalized {
        var unmapped: Set<String> = []
        let top = try mapping.object(json, "verifyReceipt response")
        let responseSlots = try response.apply(top, path: "response", unmapped: &unmapped)
        let facts = buildRecord(LegacyResponseFacts(), LegacyResponseFacts.fields, responseSlots)
        var inherited = response.named(responseSlots)

        var appTransaction: CanonicalAppTransaction?
        var inAppEntries: [JSONValue] = []
        if let receiptJSON = top["receipt"], receiptJSON != .null {
            let receiptObject = try mapping.object(receiptJSON, "receipt")
            let slots = try receipt.apply(receiptObject, path: "receipt", inherited: inherited, unmapped: &unmapped)
            appTransaction = mapping.appTransaction(receipt, slots: slots)
            inherited.merge(receipt.named(slots)) { _, fromReceipt in fromReceipt }
            inAppEntries = Self.entries(receiptObject["in_app"])
        }

        var byId: [String: CanonicalTransaction] = [:]
        for (listName, entries) in [("latest_receipt_info", Self.entries(top["latest_receipt_info"])),
                                    ("in_app", inAppEntries)] {
            for (i, entry) in entries.enumerated() {
                let path = "\(listName)[\(i)]"
                let t = try mapping.transaction(inApp, try mapping.object(entry, path), path: path,
                                                inherited: inherited, unmapped: &unmapped)
                if byId[t.transactionId] == nil { byId[t.transactionId] = t }
            }
        }
        // The subscription group belongs to the chain: `in_app` entries (older renewals, when
        // `exclude-old-transactions` keeps them out of latest_receipt_info) omit it, while the Server
        // API states it on every transaction. Filled in from the chain, or every renewed
        // subscription would read as a disagreement between the generations.
        var groupByChain: [String: String] = [:]
        for t in byId.values {
            if let group = t.subscriptionGroupIdentifier { groupByChain[t.originalTransactionId ?? t.transactionId] = group }
        }
        for (id, t) in byId where t.subscriptionGroupIdentifier == nil {
            byId[id]?.subscriptionGroupIdentifier = groupByChain[t.originalTransactionId ?? t.transactionId]
        }
        let transactions = byId.values.sorted {
            ($0.purchaseDate ?? 0, $0.transactionId) < ($1.purchaseDate ?? 0, $1.transactionId)
        }

        var renewals: [CanonicalRenewal] = []
        for (i, entry) in Self.entries(top["pending_renewal_info"]).enumerated() {
            let path = "pending_renewal_info[\(i)]"
            renewals.append(try mapping.renewal(pendingRenewal, try mapping.object(entry, path), path: path,
                                                inherited: inherited, unmapped: &unmapped))
        }

        return LegacyNormalized(status: facts.status, environment: facts.environment, isRetryable: facts.isRetryable,
                                appTransaction: appTransaction, transactions: transactions, renewals: renewals,
                                unmappedFields: unmapped.sorted(), source: mapping.source, mappingVersion: mapping.id)
    }

    /// A nested record list; an object alone counts as a list of one (old iOS 6-style responses sent
    /// `latest_receipt_info` as a single object). The shape was checked by the response rules.
    private static func entries(_ value: JSONValue?) -> [JSONValue] {
        switch value {
        case .array(let items)?: items
        case .object?: [value!]
        default: []
        }
    }
}
