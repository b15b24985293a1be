import AppleTrust
import Foundation
import IAPConfig
import IAPCore

/// The ledger's logic, written once over `SQLDatabase`: SQLite (`sqlite:PATH`, the default for one
/// gateway instance) or PostgreSQL (`postgres://…`, for several instances sharing one database).
/// Every guarantee of `Ledger`, `NotificationLedger`, `ComparisonLedger` and `ReconciliationLedger`
/// holds on both; the same test suite runs against each. Its calls block their thread: the gateway
/// reaches it through `AsyncSQLLedger`, which runs them on storage threads of their own.
public final class SQLLedger: Sendable {
    let database: any SQLDatabase
    /// The apps whose webhook events the outbox keeps.
    let webhookAudience: WebhookAudience

    /// Opens the ledger at `storage`: `sqlite:PATH` (or a plain path), `postgres://…` or
    /// `postgresql://…`. Creates what is missing (an SQLite file and its directory) and applies the
    /// schema migrations not yet applied; refuses a database from a newer schema.
    ///
    /// No engine wait lasts longer than `deadline`: SQLite's busy timeout; PostgreSQL's
    /// `statement_timeout`, `lock_timeout` (a chain lock another instance holds) and the wait for a
    /// pooled connection. A session idle inside a transaction for twice as long (an instance paused
    /// mid-claim, holding a chain's lock) is ended by the server, which releases its locks.
    public convenience init(storage: String, deadline: Duration = .seconds(5),
                            webhookAudience: WebhookAudience = .everyApp) throws(VerificationError) {
        let milliseconds = max(1, Int(deadline / .milliseconds(1)))
        switch LedgerStorage(storage) {
        case .postgres(let url):
            self.init(database: try PostgresDatabase(url: url, migrations: LedgerSchema.migrations(.postgres),
                                                     waitMilliseconds: milliseconds),
                      webhookAudience: webhookAudience)
        case .sqlite:
            try self.init(storage: storage, migrations: LedgerSchema.migrations(.sqlite),
                          busyTimeoutMilliseconds: Int32(clamping: milliseconds), webhookAudience: webhookAudience)
        }
    }

    /// An SQLite ledger; tests pass other migration lists to prove versioning.
    convenience init(storage: String, migrations: [String], busyTimeoutMilliseconds: Int32 = 5_000,
                     webhookAudience: WebhookAudience = .everyApp) throws(VerificationError) {
        guard case .sqlite(let path) = LedgerStorage(storage) else {
            throw VerificationError(.storageUnavailable, "storage: not an SQLite path")
        }
        guard !path.isEmpty else {
            throw VerificationError(.storageUnavailable, "storage: empty SQLite path")
        }
        let parent = URL(fileURLWithPath: path).deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        } catch {
            throw VerificationError(.storageUnavailable, "storage: cannot create the ledger's directory")
        }
        self.init(database: try SQLiteDatabase(path: path, migrations: migrations,
                                               busyTimeoutMilliseconds: busyTimeoutMilliseconds),
                  webhookAudience: webhookAudience)
    }

    init(database: any SQLDatabase, webhookAudience: WebhookAudience = .everyApp) {
        self.database = database
        self.webhookAudience = webhookAudience
    }

    /// How many calls the engine can take at once: write calls waiting for the batch in flight are
    /// committed together (`GroupCommit`), so a batch can hold as many calls as there are threads
    /// waiting; PostgreSQL's reads wait for one of its pooled connections, of which there may be more.
    public var concurrentCalls: Int { max((database as? PostgresDatabase)?.maxConnections ?? 0, Self.groupCommitCalls) }

    /// Storage threads: the largest group commit. Blocked threads cost only their stacks.
    static let groupCommitCalls = 32

    // MARK: Claims

    public func claim(_ claim: PurchaseClaim) throws(VerificationError) -> ClaimOutcome {
        try database.transaction { (connection) throws(VerificationError) -> ClaimOutcome in try self.claim(claim, on: connection) }
    }

    /// The name of a purchase chain's transaction lock (`serializeTransaction`): claims, the inbox
    /// drain and the entitlement sweep each take it before they read or change the chain, so the
    /// three must name it alike.
    static func chainLock(bundleId: String, originalTransactionId: String) -> String {
        "chain:\(bundleId):\(originalTransactionId)"
    }

    /// The chain locks a claim takes, in the one order every taker of several uses.
    static func chainLocks(of claim: PurchaseClaim) -> [String] {
        chainLocks(bundleId: claim.bundleId, chains(of: claim))
    }

    static func chainLocks(bundleId: String, _ chains: Set<String>) -> [String] {
        chains.map { chainLock(bundleId: bundleId, originalTransactionId: $0) }.sorted()
    }

    /// The purchase chains a claim touches: its transactions' and its entitlements'.
    static func chains(of claim: PurchaseClaim) -> Set<String> {
        Set(claim.transactions.map { $0.originalTransactionId ?? $0.transactionId } + claim.entitlements.map(\.originalTransactionId))
    }

    /// The claim's work inside a write transaction (its own, or a batch's savepoint: `BatchedWriter`).
    func claim(_ claim: PurchaseClaim, on connection: any SQLConnection) throws(VerificationError) -> ClaimOutcome {
        var outcome = ClaimOutcome(newlyGranted: [], alreadyGranted: [])
        // The same chain locks the notification worker takes, in one order (no deadlock between
        // two claims): a notification applied meanwhile by another instance is seen, not overwritten.
        let chains = Self.chains(of: claim)
        try connection.serializeTransaction(onEach: Self.chainLocks(bundleId: claim.bundleId, chains))
        var reads = try ClaimReads(prefetching: claim, chains: chains, connection)
        for key in Set(claim.appPurchaseKeys).sorted() { try bind(key, in: claim, &reads, connection) }
        var seen = Set<String>()
        for transaction in claim.transactions where seen.insert(transaction.transactionId).inserted {
            let key = transaction.originalTransactionId ?? transaction.transactionId
            try bind(key, in: claim, &reads, connection)
            if try grant(transaction, key: key, in: claim, reads, connection) {
                outcome.newlyGranted.append(transaction.transactionId)
                try Self.queueFinish(transaction, key: key, in: claim, connection)
            } else {
                outcome.alreadyGranted.append(transaction.transactionId)
            }
        }
        for entitlement in claim.entitlements {
            try store(entitlement, in: claim, &reads, connection)
        }
        for chain in chains.sorted() {
            if let state = try reads.state(chain, bundleId: claim.bundleId, connection),
               state.lastSignedDate > claim.factTime(of: chain) {
                outcome.newerFacts[chain] = state.state
            }
        }
        outcome.entitlements = try reads.accountEntitlements(bundleId: claim.bundleId, account: claim.account, connection)
            .filter { chains.contains($0.originalTransactionId) }
        guard let judge = claim.judge else { return outcome }
        let answer = try judge.judge(outcome)
        try Self.insertAudit(answer.audit, deferred: true, connection)
        if let write = claim.idempotency {
            try Self.storeAnswer(write, bundleId: claim.bundleId, status: 200, body: answer.body, now: claim.now, connection)
        }
        outcome.answer = answer
        return outcome
    }

    private static let boundElsewhere = VerificationError(.transactionBoundToOtherAccount,
                                                          "this purchase is already bound to another account")

    /// Binds the purchase to the claiming account unless it already belongs to someone. The
    /// unique key decides a race: the insert does nothing if another claim bound it first.
    private func bind(_ key: String, in claim: PurchaseClaim, _ reads: inout ClaimReads,
                      _ connection: any SQLConnection) throws(VerificationError) {
        if reads.boundToClaimant.contains(key) { return }
        var owner = try reads.owner(key, bundleId: claim.bundleId, connection)
        if owner == nil {
            let inserted = try connection.run("""
                INSERT INTO ownership (bundle_id, ownership_key, account, bound_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (bundle_id, ownership_key) DO NOTHING
                """, .text(claim.bundleId), .text(key), .text(claim.account), .integer(claim.now))
            owner = inserted == 1 ? claim.account : try Self.ownerOf(key, bundleId: claim.bundleId, connection)
        }
        guard owner == claim.account else { throw Self.boundElsewhere }
        reads.boundToClaimant.insert(key)
    }

    /// Records the transaction; true if this is its first grant. A known transaction keeps its
    /// first_granted_at and takes the newer facts (see `TransactionFacts.merge`).
    private func grant(_ transaction: CanonicalTransaction, key: String, in claim: PurchaseClaim,
                       _ reads: ClaimReads, _ connection: any SQLConnection) throws(VerificationError) -> Bool {
        let json = Self.json(transaction)
        if let stored = reads.storedTransaction(transaction.transactionId) ?? nil {
            return try regrant(transaction, json: json, stored: stored, in: claim, connection)
        }
        let inserted = try connection.run("""
            INSERT INTO transactions (bundle_id, transaction_id, ownership_key, account, product_id,
                                      canonical_json, first_granted_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (bundle_id, transaction_id) DO NOTHING
            """, .text(claim.bundleId), .text(transaction.transactionId), .text(key), .text(claim.account),
            .text(transaction.productId), .text(json), .integer(claim.now),
            .integer(claim.now))
        if inserted == 1 { return true }
        let existing = try connection.query(ClaimReads.transactionQuery, .text(claim.bundleId), .text(transaction.transactionId)) {
            (row) throws(VerificationError) in try ClaimReads.StoredTransaction(row)
        }
        guard let stored = existing.first else { throw SQLRow.corrupt }
        return try regrant(transaction, json: json, stored: stored, in: claim, connection)
    }

    /// A transaction granted before: false, its facts merged into the stored row.
    private func regrant(_ transaction: CanonicalTransaction, json: String, stored: ClaimReads.StoredTransaction,
                         in claim: PurchaseClaim, _ connection: any SQLConnection) throws(VerificationError) -> Bool {
        // The same transaction reached under another ownership key must not change hands either.
        guard stored.account == claim.account else { throw Self.boundElsewhere }
        // The common re-claim repeats the stored facts exactly: nothing to merge or write.
        if stored.json == json { return false }
        let merged = TransactionFacts.merge(stored: try Self.decode(stored.json), incoming: transaction)
        try connection.run("""
            UPDATE transactions SET product_id = ?, canonical_json = ?, updated_at = ?
            WHERE bundle_id = ? AND transaction_id = ?
            """, .text(merged.productId), .text(Self.json(merged)), .integer(claim.now),
            .text(claim.bundleId), .text(transaction.transactionId))
        return false
    }

    private func store(_ entitlement: Entitlement, in claim: PurchaseClaim, _ reads: inout ClaimReads,
                       _ connection: any SQLConnection) throws(VerificationError) {
        // An entitlement is only as good as the ownership behind it: never store one for a
        // purchase the claiming account does not own.
        guard entitlement.account == claim.account else {
            throw VerificationError(.internalError, "storage: entitlement for another account than the claim")
        }
        if !reads.boundToClaimant.contains(entitlement.originalTransactionId) {
            switch try reads.owner(entitlement.originalTransactionId, bundleId: claim.bundleId, connection) {
            case claim.account?: reads.boundToClaimant.insert(entitlement.originalTransactionId)
            case nil: throw VerificationError(.internalError, "storage: entitlement for a purchase not bound")
            case _?: throw Self.boundElsewhere
            }
        }
        // Facts are ordered by when Apple stated them, on both paths: a notification signed after
        // this evidence (a refund the device-signed transaction cannot know of) decides the chain,
        // and an older fact never overwrites a newer row.
        let factTime = claim.factTime(of: entitlement.originalTransactionId)
        if let state = try reads.state(entitlement.originalTransactionId, bundleId: claim.bundleId, connection),
           state.lastSignedDate > factTime {
            reads.entitlementsWritten = true
            try Self.storeOwnerEntitlement(state, connection)
            return
        }
        // The common re-claim states what the row already holds: nothing to write, nor to read back.
        if let stored = reads.storedEntitlement(entitlement.originalTransactionId),
           !Self.entitlementWriteChanges(stored, with: entitlement, factTime: factTime) {
            return
        }
        reads.entitlementsWritten = true
        try Self.upsertEntitlement(bundleId: claim.bundleId, account: claim.account,
                                   originalTransactionId: entitlement.originalTransactionId,
                                   productId: entitlement.productId, state: entitlement.state.rawValue,
                                   expiresDate: entitlement.expiresDate,
                                   commitmentExpiresDate: entitlement.commitmentExpiresDate, source: entitlement.source,
                                   factTime: factTime, deferred: true, connection)
    }

    /// The one write of an entitlement row, for claims and notifications alike. `updated_at` is the
    /// time of the fact the row holds: an older fact never overwrites a newer one, and a row that
    /// would not change is not rewritten. `deferred`: sent with the caller's next statement
    /// (`SQLConnection.deferWrite`), which then reports its failure.
    static func upsertEntitlement(bundleId: String, account: String, originalTransactionId: String, productId: String,
                                  state: String, expiresDate: Int64?, commitmentExpiresDate: Int64?, source: String,
                                  factTime: Int64, deferred: Bool = false, _ connection: any SQLConnection)
        throws(VerificationError) {
        let sql = """
            INSERT INTO entitlements (bundle_id, account, original_transaction_id, product_id, state,
                                      expires_date, commitment_expires_date, source, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (bundle_id, account, original_transaction_id) DO UPDATE SET
                product_id = excluded.product_id, state = excluded.state, expires_date = excluded.expires_date,
                commitment_expires_date = excluded.commitment_expires_date,
                source = excluded.source, updated_at = excluded.updated_at
            WHERE entitlements.updated_at < excluded.updated_at
               OR (entitlements.updated_at = excluded.updated_at
                   AND (entitlements.product_id IS DISTINCT FROM excluded.product_id
                        OR entitlements.state IS DISTINCT FROM excluded.state
                        OR entitlements.expires_date IS DISTINCT FROM excluded.expires_date
                        OR entitlements.commitment_expires_date IS DISTINCT FROM excluded.commitment_expires_date
                        OR entitlements.source IS DISTINCT FROM excluded.source))
            """
        let arguments: [SQLValue] = [.text(bundleId), .text(account), .text(originalTransactionId), .text(productId),
                                     .text(state), .integer(expiresDate), .integer(commitmentExpiresDate), .text(source),
                                     .integer(factTime)]
        if deferred { return try connection.deferWrite(sql, arguments) }
        try connection.run(sql, arguments)
    }

    /// `upsertEntitlement`'s condition, for a row already read under the chain's lock: whether that
    /// write of `entitlement`, a fact of `factTime`, would change the row.
    static func entitlementWriteChanges(_ stored: ClaimReads.StoredEntitlement, with entitlement: Entitlement,
                                        factTime: Int64) -> Bool {
        stored.updatedAt < factTime || (stored.updatedAt == factTime && stored.entitlement != entitlement)
    }

    static func ownerOf(_ key: String, bundleId: String, _ connection: any SQLConnection)
        throws(VerificationError) -> String? {
        try connection.query(ClaimReads.ownerQuery, .text(bundleId), .text(key)) { (row) throws(VerificationError) in
            try row.requiredText(0)
        }.first
    }

    /// Sorted-key JSON that `decode` (JSONDecoder) reads back: the same document JSONEncoder writes
    /// (tested in IAPCore), without its cost on every claim.
    private static func json(_ transaction: CanonicalTransaction) -> String {
        transaction.jsonText
    }

    static func decode(_ json: String) throws(VerificationError) -> CanonicalTransaction {
        guard let transaction = try? JSONDecoder().decode(CanonicalTransaction.self, from: Data(json.utf8)) else {
            throw SQLRow.corrupt
        }
        return transaction
    }

    // MARK: Reads

    public func entitlements(bundleId: String, account: String) throws(VerificationError) -> [Entitlement] {
        try database.withConnection { (connection) throws(VerificationError) in
            try Self.entitlements(bundleId: bundleId, account: account, connection)
        }
    }

    static func entitlements(bundleId: String, account: String, _ connection: any SQLConnection)
        throws(VerificationError) -> [Entitlement] {
        try connection.query(entitlementsQuery, .text(bundleId), .text(account)) { (row) throws(VerificationError) in
            try entitlement(row, of: account)
        }
    }

    /// An account's entitlement rows, with the time of the fact each holds last (column 6).
    static let entitlementsQuery = """
        SELECT original_transaction_id, product_id, state, expires_date, source, commitment_expires_date, updated_at
        FROM entitlements WHERE bundle_id = ? AND account = ? ORDER BY original_transaction_id
        """

    static func entitlement(_ row: SQLRow, of account: String) throws(VerificationError) -> Entitlement {
        guard let state = Entitlement.State(rawValue: try row.requiredText(2)) else { throw SQLRow.corrupt }
        return Entitlement(account: account, productId: try row.requiredText(1), state: state,
                           expiresDate: row.integer(3), originalTransactionId: try row.requiredText(0),
                           source: try row.requiredText(4), commitmentExpiresDate: row.integer(5))
    }

    public func owner(bundleId: String, originalTransactionId: String) throws(VerificationError) -> String? {
        try database.withConnection { (connection) throws(VerificationError) in
            try Self.ownerOf(originalTransactionId, bundleId: bundleId, connection)
        }
    }

    public func transactions(bundleId: String, originalTransactionId: String)
        throws(VerificationError) -> [CanonicalTransaction] {
        let stored = try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT canonical_json FROM transactions WHERE bundle_id = ? AND ownership_key = ?
                ORDER BY first_granted_at, transaction_id
                """, .text(bundleId), .text(originalTransactionId)) { (row) throws(VerificationError) in
                try row.requiredText(0)
            }
        }
        var result: [CanonicalTransaction] = []
        for json in stored { result.append(try Self.decode(json)) }
        return result
    }

    // MARK: Receipts, readiness

    public func storeLatestReceipt(bundleId: String, originalTransactionId: String, sealedReceipt: Data)
        throws(VerificationError) {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.run("""
                INSERT INTO latest_receipts (bundle_id, original_transaction_id, sealed_receipt) VALUES (?, ?, ?)
                ON CONFLICT (bundle_id, original_transaction_id) DO UPDATE SET sealed_receipt = excluded.sealed_receipt
                """, .text(bundleId), .text(originalTransactionId), .blob(sealedReceipt))
        }
    }

    public func latestReceipt(bundleId: String, originalTransactionId: String) throws(VerificationError) -> Data? {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT sealed_receipt FROM latest_receipts WHERE bundle_id = ? AND original_transaction_id = ?
                """, .text(bundleId), .text(originalTransactionId)) { (row) throws(VerificationError) in
                row.blob(0) ?? Data()
            }.first
        }
    }

    public func ping() throws(VerificationError) {
        _ = try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("SELECT 1") { (row) throws(VerificationError) in try row.requiredInteger(0) }
        }
    }

    /// Proves the storage takes writes again (readiness after a failed write): commits a row large
    /// enough to need new pages (64 KiB) and removes it in the same transaction, so a full disk or
    /// database still refuses it while a write that fits in a page already there would pass.
    public func probeWrite() throws(VerificationError) {
        try database.transaction { (connection) throws(VerificationError) in
            try connection.run("INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, 0)",
                               .text("readiness-probe-\(UUID().uuidString)"), .text(String(repeating: "0", count: 65_536)))
            try connection.run("DELETE FROM leases WHERE name LIKE 'readiness-probe-%'")
        }
    }
}
