import Foundation
import IAPCore
import Synchronization
import XCTest
@testable import Ledger

/// What only the PostgreSQL backend has to prove: several gateway instances on one database, and
/// sessions that die under a running gateway. The tests that need a server run when
/// `IAPGW_TEST_POSTGRES_URL` is set (Scripts/test.sh starts one); the others always run.
final class PostgresLedgerTests: InboxTestCase {
    private func requireServer() throws {
        try XCTSkipUnless(usesPostgres, "needs IAPGW_TEST_POSTGRES_URL (Scripts/postgres.sh start)")
    }

    // MARK: Without a server

    /// The schema is written once; each engine's text carries its own DDL words only.
    func testEachEngineSchemaHasOnlyItsOwnDDLWords() {
        let postgres = LedgerSchema.migrations(.postgres).joined(separator: "\n")
        let sqlite = LedgerSchema.migrations(.sqlite).joined(separator: "\n")
        for word in ["INTEGER", "BLOB", "AUTOINCREMENT", "WITHOUT ROWID"] {
            XCTAssertFalse(postgres.contains(word), "\(word) in the PostgreSQL schema")
        }
        for word in ["BIGINT", "BYTEA", "IDENTITY"] {
            XCTAssertFalse(sqlite.contains(word), "\(word) in the SQLite schema")
        }
    }

    func testPlaceholdersAreNumberedInOrderAndQuotedQuestionMarksStayText() {
        let (sql, count) = PostgresConnection.numberedPlaceholders(
            "SELECT a FROM t WHERE b = ? AND c = '?' AND \"d?\" IN (?, ?)")
        XCTAssertEqual(sql, "SELECT a FROM t WHERE b = $1 AND c = '?' AND \"d?\" IN ($2, $3)")
        XCTAssertEqual(count, 3)
    }

    func testUnreachableServerIsStorageUnavailableAndTheURLsPasswordIsNeverEchoed() {
        // Port 1 on loopback: refused at once, no waiting for a timeout.
        let url = "postgres://gateway:pw-s3cret-value@127.0.0.1:1/ledger?connect_timeout=2"
        let error = errorThrown { () throws(VerificationError) in _ = try SQLLedger(storage: url) }
        XCTAssertEqual(error?.code, .storageUnavailable)
        XCTAssertEqual(error?.retryable, true)
        XCTAssertFalse(error?.message.contains("pw-s3cret-value") ?? true)
        XCTAssertFalse(error?.message.contains("gateway") ?? true)
    }

    // MARK: Round trips

    /// Each batch claims its entries in one statement, the locks of their chains in one more, and
    /// reads the chains' states and owners in a third; savepoints and writes whose answer nobody reads
    /// go in one pipeline with the entry's RELEASE. So an entry (a new state, its owner's entitlement,
    /// a webhook) costs one round trip, a batch a few more (BEGIN, claim, locks, reads, COMMIT); 9.2 per
    /// entry when each statement was its own, 4.25 with the lock, the state and the owner read per entry
    /// (and one more for an owner's entitlement).
    func testDrainingAnEntryTakesOneRoundTripAndABatchAFewMore() throws {
        try requireServer()
        let ledger = try openLedger()
        let database = try XCTUnwrap(ledger.database as? PostgresDatabase)
        let entries = 32
        for index in 0..<(2 * entries) {
            XCTAssertTrue(try ledger.enqueue(entry("rt-\(index)", signedDate: t0 + Int64(index), chain: "rt-\(index)")))
        }
        // Half the chains have an owner, whose entitlement each entry moves too.
        let owned = stride(from: 0, to: 2 * entries, by: 2).map { "rt-\($0)" }
        for chain in owned {
            _ = try ledger.claim(claim("alice", [transaction(chain, original: chain)],
                                       entitlements: [entitlement("alice", original: chain)], now: t0 - 1))
        }
        // One batch per drain, all on one connection: the first prepares the statements on it (once
        // per session).
        let batch = SQLLedger.entriesPerCommit
        XCTAssertEqual(try drain(ledger, limit: batch).processed, batch)
        let before = database.roundTrips.total
        for _ in 0..<(entries / batch) { XCTAssertEqual(try drain(ledger, limit: batch).processed, batch) }
        let roundTrips = database.roundTrips.total - before
        XCTAssertLessThanOrEqual(roundTrips, entries + 8 * (entries / batch), "\(roundTrips) round trips for \(entries) entries")
        let applied = Int64(batch + entries)
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM notification_inbox WHERE processed_at IS NOT NULL"), applied)
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM subscription_states"), applied)
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM webhook_outbox"), applied)
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM entitlements WHERE source = 'notification'"),
                       applied / 2, "the owners' entitlements follow their chains")
    }

    /// A claim reads everything it may need in one pipeline up front (owners, transactions, chain
    /// states, the account's entitlements) and defers the writes whose answer nobody reads, so a
    /// re-claim that changes nothing costs one round trip of its own. Around it, its own transaction
    /// costs three more (BEGIN, the chain lock, COMMIT); in a batch those are shared, and a call takes
    /// no lock its batch already holds. Nine in all when each read and write went on its own.
    func testAReClaimThatChangesNothingCostsOneRoundTripOfItsOwn() throws {
        try requireServer()
        let ledger = try openLedger()
        let database = try XCTUnwrap(ledger.database as? PostgresDatabase)
        let purchase = claim("alice", [transaction("rc-1", original: "rc-1")],
                             entitlements: [entitlement("alice", original: "rc-1")], now: t0)
        XCTAssertEqual(try ledger.claim(purchase).newlyGranted, ["rc-1"])
        var counts: [Int] = []
        // The first re-claims prepare the statements on whichever pooled connection they get.
        for _ in 0..<4 {
            let before = database.roundTrips.total
            XCTAssertEqual(try ledger.claim(purchase).alreadyGranted, ["rc-1"])
            counts.append(database.roundTrips.total - before)
        }
        XCTAssertEqual(counts.min(), 4, "round trips of each re-claim: \(counts)")
        XCTAssertEqual(try ledger.entitlements(bundleId: "com.example.app", account: "alice").map(\.originalTransactionId), ["rc-1"])
    }

    /// One drain keeps several batches in flight, each in its own transaction on its own connection,
    /// so their round trips overlap: while an entry of a later batch is being applied, another
    /// batch holds its claim (its chains' locks, on another backend) at the same moment.
    func testOneDrainHasSeveralBatchesInFlightOnConnectionsOfTheirOwn() throws {
        try requireServer()
        let ledger = try openLedger()
        let observer = try openLedger()
        let total = 4 * SQLLedger.entriesPerCommit
        for index in 0..<total {
            XCTAssertTrue(try ledger.enqueue(entry("f-\(index)", signedDate: t0 + Int64(index), chain: "f-\(index)")))
        }
        var holders: Int64 = 0
        let report = try ledger.processPending(limit: total, now: t0 + day) { (entry, stored) throws(VerificationError) in
            // The first batch runs alone; in the first entry applied after it, look for a second one.
            if holders == 0, entry.signedDate >= t0 + Int64(SQLLedger.entriesPerCommit) {
                let deadline = Date().addingTimeInterval(5)
                repeat {
                    holders = (try? self.count(observer, """
                        SELECT COUNT(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory' AND granted
                        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                        """)) ?? 0
                    if holders < 2 { Thread.sleep(forTimeInterval: 0.02) }
                } while holders < 2 && Date() < deadline
            }
            return self.fakeOutcome(entry, stored)
        }
        XCTAssertGreaterThanOrEqual(holders, 2, "batches of one drain holding their claims at once")
        XCTAssertEqual(report.processed, total)
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM notification_inbox WHERE processed_at IS NULL"), 0)
    }

    /// With batches side by side, each chain's entries are still applied once each and in Apple's
    /// order, each given the state the one before it left: a batch leaves an entry whose chain
    /// another batch of the drain holds for a later batch, and the claims take the oldest first.
    func testBatchesInFlightApplyEachChainInOrderAndEachEntryOnce() throws {
        try requireServer()
        let ledger = try openLedger()
        let chains = 7
        let total = 20 * SQLLedger.entriesPerCommit
        for index in 0..<total {
            // Arrival order differs from Apple's: the drain must follow signedDate.
            let signed = t0 + Int64((index * 37) % total)
            XCTAssertTrue(try ledger.enqueue(entry("o-\(index)", signedDate: signed, chain: "o-\(index % chains)")))
        }
        var applied: [String: [Int64]] = [:]
        var misordered: [String] = []
        for _ in 0..<total {
            let report = try ledger.processPending(limit: total, now: t0 + day) { (entry, stored) throws(VerificationError) in
                let chain = entry.event?.originalTransactionId ?? "-"
                applied[chain, default: []].append(entry.signedDate)
                if let stored, stored.lastSignedDate >= entry.signedDate {
                    misordered.append("\(entry.id) after a state of \(stored.lastSignedDate)")
                }
                return self.fakeOutcome(entry, stored)
            }
            if report.processed == 0 { break }
        }
        XCTAssertEqual(misordered, [])
        XCTAssertEqual(applied.values.map(\.count).reduce(0, +), total, "each entry applied once")
        for (chain, dates) in applied {
            XCTAssertEqual(dates, dates.sorted(), "\(chain) in signedDate order")
            XCTAssertEqual(Set(dates).count, dates.count, "\(chain): no entry applied twice")
        }
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM notification_inbox WHERE processed_at IS NULL"), 0)
    }

    /// A deferred write that fails is reported by the statement after it, in its own entry: the
    /// entry is rolled back alone and retried later, the others of the batch apply. All three are
    /// of one chain, so the entry after the failed one must be given the state the one before left
    /// (the failed entry's state is carried forward only once its RELEASE succeeded).
    func testADeferredWriteThatFailsFailsItsOwnEntryOnly() throws {
        try requireServer()
        let ledger = try openLedger()
        // A rule only the server checks, so the deferred upsert of d-1's state fails there.
        try ledger.database.withConnection { (connection) throws(VerificationError) in
            try connection.executeScript("""
                ALTER TABLE subscription_states ADD CONSTRAINT test_refused CHECK (product_id <> 'refused-by-server')
                """, operation: "test constraint")
        }
        for index in 0..<3 {
            XCTAssertTrue(try ledger.enqueue(entry("d-\(index)", signedDate: t0 + Int64(index), chain: "d")))
        }
        var applied: [String] = []
        let report = try ledger.processPending(limit: 10, now: t0 + day) { (entry, stored) throws(VerificationError) in
            applied.append("\(entry.id)<-\(stored.map { String($0.lastSignedDate - t0) } ?? "none")")
            var outcome = fakeOutcome(entry, stored)
            if entry.id == "d-1" { outcome.newState?.productId = "refused-by-server" }
            return outcome
        }
        XCTAssertEqual(applied, ["d-0<-none", "d-1<-0", "d-2<-0"])
        XCTAssertEqual(report.processed, 2)
        XCTAssertEqual(report.failed, 1)
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM notification_inbox WHERE processed_at IS NOT NULL"), 2)
        XCTAssertEqual(try count(ledger, "SELECT attempts FROM notification_inbox WHERE notification_id = 'd-1'"), 1)
        let state = try ledger.subscriptionState(bundleId: app, originalTransactionId: "d")
        XCTAssertEqual(state?.lastSignedDate, t0 + 2)
        XCTAssertEqual(state?.productId, "com.example.pro")
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM webhook_outbox"), 2)
    }

    /// A batch that meets a transient conflict (here a serialization failure the server raises once,
    /// while the batch reads its chains) is run again by the group commit in a later transaction:
    /// the rerun claims the entries again and applies them, its first claim's chains no longer
    /// counted as held by a batch in flight.
    func testABatchRunAgainAfterATransientConflictAppliesItsEntries() throws {
        try requireServer()
        let ledger = try openLedger()
        let batch = SQLLedger.entriesPerCommit
        for index in 0..<batch {
            XCTAssertTrue(try ledger.enqueue(entry("r-\(index)", signedDate: t0 + Int64(index), chain: "r-\(index)")))
        }
        _ = try ledger.claim(claim("alice", [transaction("r-0", original: "r-0")],
                                   entitlements: [entitlement("alice", original: "r-0")], now: t0 - 1))
        // The owner lookup of the batch's chains fails once, as a conflict with another session would.
        try ledger.database.withConnection { (connection) throws(VerificationError) in
            try connection.executeScript("""
                CREATE SEQUENCE test_conflicts;
                CREATE FUNCTION test_conflict_once() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
                BEGIN
                    IF nextval('test_conflicts') = 1 THEN
                        RAISE EXCEPTION 'test conflict' USING ERRCODE = 'serialization_failure';
                    END IF;
                    RETURN true;
                END $$;
                ALTER TABLE ownership RENAME TO ownership_rows;
                CREATE VIEW ownership AS SELECT * FROM ownership_rows WHERE test_conflict_once();
                """, operation: "test conflict")
        }
        // Room for the rerun's claim within the limit: it applies them, not a later drain.
        XCTAssertEqual(try drain(ledger, limit: 2 * batch).processed, batch)
        XCTAssertGreaterThanOrEqual(try count(ledger, "SELECT last_value FROM test_conflicts"), 2, "the batch was run again")
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM notification_inbox WHERE processed_at IS NULL"), 0)
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM entitlements WHERE source = 'notification'"), 1)
    }

    // MARK: Many instances

    func testConflictingClaimsOnTwoPurchasesFromTwoInstancesGiveBothToOneAccount() throws {
        try requireServer()
        let instances = [try openLedger(), try openLedger()]
        let winners = Mutex<[String]>([])
        let refusals = Mutex<[VerificationError.Code]>([])
        let purchases = ["7000", "8000"].map { transaction($0, original: $0) }
        let claims = (0..<50).map { index in
            let account = "account-\(index)"
            // Half name the purchases in the other order: the ledger must lock them in one order.
            return claim(account, index.isMultiple(of: 2) ? purchases : purchases.reversed(),
                         entitlements: ["7000", "8000"].map { entitlement(account, original: $0) })
        }
        DispatchQueue.concurrentPerform(iterations: claims.count) { index in
            let account = claims[index].account
            do throws(VerificationError) {
                let outcome = try instances[index % 2].claim(claims[index])
                if outcome.newlyGranted.count == 2 { winners.withLock { $0.append(account) } }
            } catch {
                refusals.withLock { $0.append(error.code) }
            }
        }
        let winner = winners.withLock { $0 }
        XCTAssertEqual(winner.count, 1)
        XCTAssertEqual(refusals.withLock { $0 }, Array(repeating: .transactionBoundToOtherAccount, count: 49))
        for instance in instances {
            XCTAssertEqual(try instance.owner(bundleId: app, originalTransactionId: "7000"), winner.first)
            XCTAssertEqual(try instance.owner(bundleId: app, originalTransactionId: "8000"), winner.first)
        }
        XCTAssertEqual(try count(instances[0], "SELECT COUNT(*) FROM entitlements"), 2)
    }

    /// An entry another instance's batch holds (claimed, its chain's lock refused) is not overtaken
    /// by a newer entry of its chain: the drain leaves that chain for later, applies the others,
    /// and once the other batch ended applies the chain's entries in order.
    func testAnEntryHeldByAnotherInstanceIsNotOvertakenByANewerOneOfItsChain() throws {
        try requireServer()
        let ledger = try openLedger()
        for (index, (id, chain)) in [("x-1", "x"), ("x-2", "x"), ("y-1", "y")].enumerated() {
            XCTAssertTrue(try ledger.enqueue(entry(id, signedDate: t0 + Int64(index), chain: chain)))
        }
        // The other instance's batch: x-1's row locked, until its transaction ends.
        let other = try PostgresConnection.open(url: storage)
        try other.executeScript("BEGIN", operation: "test begin")
        let held = try other.query("SELECT seq FROM notification_inbox WHERE notification_id = 'x-1' FOR UPDATE") {
            (row) throws(VerificationError) in try row.requiredInteger(0)
        }
        XCTAssertEqual(held.count, 1)
        var applied: [String] = []
        XCTAssertEqual(try drain(ledger, applied: &applied).processed, 1)
        XCTAssertEqual(applied, ["y-1"])
        try other.executeScript("ROLLBACK", operation: "test rollback")
        XCTAssertEqual(try drain(ledger, applied: &applied).processed, 2)
        XCTAssertEqual(applied, ["y-1", "x-1", "x-2"])
    }

    func testPendingEntriesProcessedConcurrentlyByTwoInstancesAreEachAppliedOnce() throws {
        try requireServer()
        let instances = [try openLedger(), try openLedger()]
        let ids = (0..<30).map { "n-\($0)" }
        for (index, id) in ids.enumerated() {
            XCTAssertTrue(try instances[0].enqueue(entry(id, signedDate: t0 + Int64(index), chain: "c-\(index % 5)")))
        }
        let applications = Mutex<[String: Int]>([:])
        let processed = Mutex(0)
        let failures = Mutex<[VerificationError.Code]>([])
        let now = t0 + day
        // Only read from the workers (the fake lifecycle is a pure function of its arguments).
        nonisolated(unsafe) let lifecycle = self
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            do throws(VerificationError) {
                let report = try instances[worker % 2].processPending(limit: 100, now: now) {
                    (entry, stored) throws(VerificationError) in
                    applications.withLock { $0[entry.id, default: 0] += 1 }
                    return lifecycle.fakeOutcome(entry, stored)
                }
                processed.withLock { $0 += report.processed }
            } catch {
                failures.withLock { $0.append(error.code) }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, [])
        // An entry whose chain another worker was applying at that moment waits for the next pass.
        var late: [String] = []
        let rest = try drain(instances[1], applied: &late)
        for id in late { applications.withLock { $0[id, default: 0] += 1 } }
        XCTAssertEqual(applications.withLock { $0 }, Dictionary(uniqueKeysWithValues: ids.map { ($0, 1) }))
        XCTAssertEqual(processed.withLock { $0 } + rest.processed, ids.count)
        XCTAssertEqual(try count(instances[1], "SELECT COUNT(*) FROM notification_inbox WHERE processed_at IS NOT NULL"),
                       Int64(ids.count))
        XCTAssertEqual(try count(instances[1], "SELECT COUNT(*) FROM webhook_outbox"), Int64(ids.count))
        XCTAssertEqual(try drain(instances[1]), ProcessReport())
    }

    /// An inbox body goes out of line as it came: PostgreSQL's default storage ran pglz over every
    /// body (a JWS it cannot shrink, a third of the server's CPU per accepted notification) before
    /// storing it as it was. A body pglz would shrink (runs of one JWS header) shows no attempt is made.
    func testInboxBodiesAreStoredOutOfLineWithoutCompression() throws {
        try requireServer()
        let ledger = try openLedger()
        let jws = String(repeating: "eyJhbGciOiJFUzI1NiIsIng1YyI6WyJNSUlFTURDQ0E3YWdBd0lCQWdJUWZUbGZkMGZOdkZXdnpDMVlJQU5zWGpBS0JnZ3Foa2pPUFFRREF6QjFNVVF3UWdZRFZRUURERHRCY0hCc1pTQlhiM0pz.", count: 120)
        let body = #"{"signedPayload":"\#(jws)"}"#
        XCTAssertTrue(try ledger.enqueue(entry("toast-1", signedDate: t0, body: body)))
        let stored = try ledger.database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT a.attstorage, pg_column_compression(i.raw_body) IS NULL, i.raw_body
                FROM notification_inbox i, pg_attribute a
                WHERE a.attrelid = 'notification_inbox'::regclass AND a.attname = 'raw_body' AND i.notification_id = ?
                """, .text("toast-1")) { (row) throws(VerificationError) in
                (try row.requiredText(0), try row.requiredText(1), row.blob(2))
            }
        }
        XCTAssertEqual(stored.map(\.0), ["e"])
        XCTAssertEqual(stored.map(\.1), ["t"])
        XCTAssertEqual(stored.map(\.2), [Data(body.utf8)])
    }

    func testInstancesStartingTogetherOnAnEmptyDatabaseApplyEachMigrationOnce() throws {
        try requireServer()
        let storage = self.storage
        let failures = Mutex<[VerificationError.Code]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            do throws(VerificationError) {
                try SQLLedger(storage: storage).ping()
            } catch {
                failures.withLock { $0.append(error.code) }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, [])
        let ledger = try openLedger()
        let versions = try ledger.database.withConnection { (connection) throws(VerificationError) in
            try connection.query("SELECT version FROM schema_migrations ORDER BY version") {
                (row) throws(VerificationError) in try row.requiredInteger(0)
            }
        }
        XCTAssertEqual(versions, (1...Int64(LedgerSchema.migrations(.postgres).count)).map { $0 })
    }

    func testTransactionsRunAtReadCommittedWhateverTheServersDefaultIsolation() throws {
        try requireServer()
        // A server (or database, or role) defaulting to REPEATABLE READ would freeze each transaction's
        // snapshot at its first statement, before the chain lock is granted: a claim would not see the
        // refund another instance committed while it waited.
        let url = storage + "%20-cdefault_transaction_isolation%3Drepeatable%5C%20read"
        let ledger = SQLLedger(database: try PostgresDatabase(url: url, migrations: LedgerSchema.migrations(.postgres)))
        let isolation = try ledger.database.transaction { (connection) throws(VerificationError) in
            try connection.query("SELECT current_setting('transaction_isolation')") {
                (row) throws(VerificationError) in try row.requiredText(0)
            }
        }
        XCTAssertEqual(isolation, ["read committed"])
    }

    func testTextWithANulCharacterIsRefusedRatherThanTruncatedIntoAnotherKey() throws {
        try requireServer()
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000")]))
        // libpq reads a text parameter up to its first NUL: "1000<NUL>x" would read alice's purchase.
        let error = errorThrown { () throws(VerificationError) in
            _ = try ledger.owner(bundleId: app, originalTransactionId: "1000\u{0}x")
        }
        XCTAssertEqual(error?.code, .internalError)
        XCTAssertEqual(try ledger.owner(bundleId: app, originalTransactionId: "1000"), "alice")
    }

    // MARK: Sessions that die

    func testTerminatedSessionIsReplacedAndTheNextCallSucceeds() throws {
        try requireServer()
        let ledger = try openLedger()
        _ = try ledger.claim(claim("alice", [transaction("1000", original: "1000")]))
        let pid = try backendPid(ledger)
        try adminExecute("SELECT pg_terminate_backend(\(pid))")
        try waitUntilSessionIsGone(pid)

        XCTAssertEqual(try ledger.owner(bundleId: app, originalTransactionId: "1000"), "alice")
        XCTAssertNotEqual(try backendPid(ledger), pid)
        XCTAssertEqual(errorCode { () throws(VerificationError) in
            _ = try ledger.claim(claim("mallory", [transaction("1000", original: "1000")]))
        }, .transactionBoundToOtherAccount)
    }

    func testSessionTerminatedInsideATransactionIsStorageUnavailableAndTheNextCallSucceeds() throws {
        try requireServer()
        let ledger = try openLedger()
        let error = errorThrown { () throws(VerificationError) in
            try ledger.database.transaction { (connection) throws(VerificationError) in
                try connection.run("INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?)",
                                   "doomed", "secret-holder", 1)
                // The session ends itself mid-transaction, as a server restart would end it.
                _ = try connection.query("SELECT pg_terminate_backend(pg_backend_pid())") {
                    (_) throws(VerificationError) in ()
                }
            }
        }
        XCTAssertEqual(error?.code, .storageUnavailable)
        XCTAssertFalse(error?.message.contains("secret-holder") ?? true)
        XCTAssertEqual(try count(ledger, "SELECT COUNT(*) FROM leases"), 0)
    }

    private func backendPid(_ ledger: SQLLedger) throws -> Int64 {
        try ledger.database.withConnection { (connection) throws(VerificationError) in
            try connection.query("SELECT pg_backend_pid()") { (row) throws(VerificationError) in
                try row.requiredInteger(0)
            }.first ?? -1
        }
    }

    /// A terminated backend tells its client before it leaves pg_stat_activity; bounded wait.
    private func waitUntilSessionIsGone(_ pid: Int64) throws {
        let admin = try PostgresConnection.open(url: try XCTUnwrap(Self.postgresServerURL))
        for _ in 0..<500 {
            let alive = try admin.queryRows("SELECT COUNT(*) FROM pg_stat_activity WHERE pid = ?", [.integer(pid)]) {
                (row) throws(VerificationError) in try row.requiredInteger(0)
            }
            if alive == [0] { return }
            usleep(10_000)
        }
        XCTFail("the terminated session did not end")
    }
}
