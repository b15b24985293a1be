import IAPCore

/// What one claim reads inside its transaction, each row once: everything it may need is asked for
/// up front in one `queryEach` (one round trip on PostgreSQL), so a re-claim that changes nothing
/// costs no other round trip (its audit row goes with the next statement of the transaction).
/// Rows read there stay true for the claim: ownership and transaction rows are never deleted or
/// handed to another account, and the chain locks the claim holds keep every other writer of its
/// chains out; entitlement rows only until the claim writes one itself.
struct ClaimReads {
    /// Ownership keys found or made bound to the claiming account.
    var boundToClaimant: Set<String> = []
    /// Owner by ownership key, as read up front (nil inside: no owner then).
    private var owners: [String: String?] = [:]
    /// Account and canonical JSON by transaction id, as read up front (nil inside: no row then).
    private var transactions: [String: StoredTransaction?] = [:]
    /// Each chain's lifecycle state (nil inside: the chain has none).
    private var states: [String: SubscriptionState?] = [:]
    /// The claiming account's entitlement rows, as read up front.
    private var entitlements: [StoredEntitlement] = []
    /// Set once the claim wrote an entitlement row: the rows read up front no longer tell them.
    var entitlementsWritten = false

    struct StoredTransaction {
        let account: String
        let json: String

        /// A row of `transactionQuery`.
        init(_ row: SQLRow) throws(VerificationError) {
            account = try row.requiredText(0)
            json = try row.requiredText(1)
        }
    }

    struct StoredEntitlement {
        let entitlement: Entitlement
        /// The time of the fact the row holds (`upsertEntitlement`).
        let updatedAt: Int64
    }

    static let ownerQuery = "SELECT account FROM ownership WHERE bundle_id = ? AND ownership_key = ?"
    static let transactionQuery = "SELECT account, canonical_json FROM transactions WHERE bundle_id = ? AND transaction_id = ?"
    static let stateQuery = "SELECT state_json FROM subscription_states WHERE bundle_id = ? AND original_transaction_id = ?"

    /// The rows a claim may need: its keys' owners, its transactions, its chains' states and the
    /// claiming account's entitlements.
    init(prefetching claim: PurchaseClaim, chains: Set<String>, _ connection: any SQLConnection) throws(VerificationError) {
        let keys = Set(claim.appPurchaseKeys + claim.transactions.map { $0.originalTransactionId ?? $0.transactionId })
        let ids = Set(claim.transactions.map(\.transactionId))
        let found = Found()
        let bundle = SQLValue.text(claim.bundleId)
        var reads: [SQLRead] = []
        for key in keys.sorted() {
            reads.append(SQLRead(sql: Self.ownerQuery, arguments: [bundle, .text(key)]) { (row) throws(VerificationError) in
                found.owners[key] = try row.requiredText(0)
            })
        }
        for id in ids.sorted() {
            reads.append(SQLRead(sql: Self.transactionQuery, arguments: [bundle, .text(id)]) { (row) throws(VerificationError) in
                found.transactions[id] = try StoredTransaction(row)
            })
        }
        for chain in chains.sorted() {
            reads.append(SQLRead(sql: Self.stateQuery, arguments: [bundle, .text(chain)]) { (row) throws(VerificationError) in
                found.states[chain] = try row.requiredText(0)
            })
        }
        reads.append(SQLRead(sql: SQLLedger.entitlementsQuery, arguments: [bundle, .text(claim.account)]) {
            (row) throws(VerificationError) in
            guard let updatedAt = row.integer(6) else { throw SQLRow.corrupt }
            found.entitlements.append(StoredEntitlement(entitlement: try SQLLedger.entitlement(row, of: claim.account),
                                                        updatedAt: updatedAt))
        })
        try connection.queryEach(reads)
        for key in keys { owners[key] = .some(found.owners[key]) }
        for id in ids { transactions[id] = .some(found.transactions[id]) }
        for chain in chains { states[chain] = .some(try found.states[chain].map(SQLLedger.decodeState)) }
        entitlements = found.entitlements
    }

    /// The rows as `queryEach` hands them over, one read after another on this thread.
    private final class Found {
        var owners: [String: String] = [:]
        var transactions: [String: StoredTransaction] = [:]
        var states: [String: String] = [:]
        var entitlements: [StoredEntitlement] = []
    }

    func owner(_ key: String, bundleId: String, _ connection: any SQLConnection) throws(VerificationError) -> String? {
        if let known = owners[key] { return known }
        return try SQLLedger.ownerOf(key, bundleId: bundleId, connection)
    }

    /// The entitlement row read up front, while the claim has written none.
    func storedEntitlement(_ originalTransactionId: String) -> StoredEntitlement? {
        guard !entitlementsWritten else { return nil }
        return entitlements.first { $0.entitlement.originalTransactionId == originalTransactionId }
    }

    /// The account's entitlements now: as read up front, unless the claim wrote one since.
    func accountEntitlements(bundleId: String, account: String, _ connection: any SQLConnection)
        throws(VerificationError) -> [Entitlement] {
        guard entitlementsWritten else { return entitlements.map(\.entitlement) }
        return try SQLLedger.entitlements(bundleId: bundleId, account: account, connection)
    }

    /// The stored row of a transaction read up front: `.some(nil)` when it had none, nil when it was not read.
    func storedTransaction(_ id: String) -> StoredTransaction?? { transactions[id] }

    mutating func state(_ chain: String, bundleId: String, _ connection: any SQLConnection)
        throws(VerificationError) -> SubscriptionState? {
        if let known = states[chain] { return known }
        let stored = try SQLLedger.storedState(bundleId: bundleId, originalTransactionId: chain, connection)
        states[chain] = .some(stored)
        return stored
    }
}
