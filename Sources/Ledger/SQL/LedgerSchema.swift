/// The ledger's migrations, in order, written once for both engines: version N means the same on
/// SQLite and PostgreSQL, so one version number describes a ledger on either. Where their DDL
/// differs the text asks the dialect (`SQLDialect.ddl`); a step both run as written is a
/// plain string. Append new versions; never edit a released one.
enum LedgerSchema {
    static func migrations(_ dialect: SQLDialect) -> [String] {
        let d = dialect.ddl
        return [v1(d), v2(d), v3(d), v4(d), v5, v6(d), v7, v8(d), v9, v10(d), v11(dialect), v12(d), v13(d), v14, v15(dialect), v16(d)]
    }

    /// Times are integer milliseconds since 1970. Nonces are stored as the SHA-256 of their value,
    /// so a copy of the file cannot be used to answer an outstanding challenge.
    static func v1(_ d: SQLDialect.DDLWords) -> String {
        """
            CREATE TABLE nonces (
                value_sha256 TEXT PRIMARY KEY,
                bundle_id TEXT NOT NULL,
                account TEXT NOT NULL,
                issued_at \(d.integer) NOT NULL,
                expires_at \(d.integer) NOT NULL,
                consumed_at \(d.integer)
            )\(d.withoutRowID);
            CREATE INDEX nonces_by_expiry ON nonces (expires_at);

            -- One row per purchase: ownership_key is originalTransactionId, or transactionId when absent.
            CREATE TABLE ownership (
                bundle_id TEXT NOT NULL,
                ownership_key TEXT NOT NULL,
                account TEXT NOT NULL,
                bound_at \(d.integer) NOT NULL,
                PRIMARY KEY (bundle_id, ownership_key)
            )\(d.withoutRowID);
            CREATE INDEX ownership_by_account ON ownership (bundle_id, account);

            -- One row per granted transaction; canonical_json is the latest facts (sorted keys).
            CREATE TABLE transactions (
                bundle_id TEXT NOT NULL,
                transaction_id TEXT NOT NULL,
                ownership_key TEXT NOT NULL,
                account TEXT NOT NULL,
                product_id TEXT NOT NULL,
                canonical_json TEXT NOT NULL,
                first_granted_at \(d.integer) NOT NULL,
                updated_at \(d.integer) NOT NULL,
                PRIMARY KEY (bundle_id, transaction_id),
                FOREIGN KEY (bundle_id, ownership_key) REFERENCES ownership (bundle_id, ownership_key)
            )\(d.withoutRowID);
            CREATE INDEX transactions_by_purchase ON transactions (bundle_id, ownership_key);

            CREATE TABLE entitlements (
                bundle_id TEXT NOT NULL,
                account TEXT NOT NULL,
                original_transaction_id TEXT NOT NULL,
                product_id TEXT NOT NULL,
                state TEXT NOT NULL,
                expires_date \(d.integer),
                source TEXT NOT NULL,
                updated_at \(d.integer) NOT NULL,
                PRIMARY KEY (bundle_id, account, original_transaction_id),
                FOREIGN KEY (bundle_id, original_transaction_id) REFERENCES ownership (bundle_id, ownership_key)
            )\(d.withoutRowID);

            -- Receipts arrive sealed by the gateway: opaque bytes here.
            CREATE TABLE latest_receipts (
                bundle_id TEXT NOT NULL,
                original_transaction_id TEXT NOT NULL,
                sealed_receipt \(d.blob) NOT NULL,
                PRIMARY KEY (bundle_id, original_transaction_id)
            )\(d.withoutRowID);

            -- Append-only. transaction_ids and product_ids are JSON arrays of strings.
            CREATE TABLE audit_log (
                \(auditColumns(d, verdicts: "CHECK (verdict IN ('granted', 'refused'))"))
            );
            CREATE INDEX audit_log_by_app ON audit_log (bundle_id, id);
            """
    }

    /// The audit_log columns as v1 created them (one a line, indented for the CREATE TABLE they
    /// stand in), with the verdict CHECK of the version that states them: v11 rebuilds the table
    /// on SQLite with these same columns, then adds its own.
    private static func auditColumns(_ d: SQLDialect.DDLWords, verdicts: String) -> String {
        [
            "id \(d.autoincrementKey)", "time \(d.integer) NOT NULL", "bundle_id TEXT NOT NULL", "account TEXT",
            "evidence_kind TEXT NOT NULL", "evidence_sha256 TEXT NOT NULL CHECK (length(evidence_sha256) = 64)",
            "transaction_ids TEXT NOT NULL", "product_ids TEXT NOT NULL", "environment TEXT",
            "verdict TEXT NOT NULL \(verdicts)", "error_code TEXT", "adapter TEXT", "latency_micros \(d.integer) NOT NULL",
        ].joined(separator: ",\n    ")
    }

    /// Leases: work that must run on one instance at a time (reconciliation). A holder owns a lease
    /// until `expires_at`; it renews while working, and a crashed holder's lease simply runs out.
    static func v4(_ d: SQLDialect.DDLWords) -> String {
        """
            CREATE TABLE leases (
                name TEXT PRIMARY KEY,
                holder TEXT NOT NULL,
                expires_at \(d.integer) NOT NULL
            )\(d.withoutRowID);
            """
    }

    /// The entitlements whose period can still end by time alone (`EntitlementAccess`: active and
    /// in grace), by end date: what the clock sweep reads every pass, without scanning the rest.
    static let v5 = """
        CREATE INDEX entitlements_ending_by_time ON entitlements (expires_date)
            WHERE state IN ('active', 'gracePeriod');
        """

    /// Who holds a webhook event's lease, so the lease can be renewed by its holder only and an
    /// instance that restarts can take back at once what its previous incarnation held.
    static let v7 = """
        ALTER TABLE webhook_outbox ADD COLUMN leased_by TEXT;
        CREATE INDEX webhook_outbox_by_holder ON webhook_outbox (leased_by) WHERE delivered_at IS NULL;
        """

    /// The finish outbox: one row per newly granted purchase of an app whose policy has
    /// `finishTransactions`, written in the claim's own transaction (so only a durable grant is ever
    /// finished) and sent to Apple's Finish Transaction by the background finisher. `finished_at` is
    /// set on Apple's success and never cleared; `dropped_at` when it must not be sent (the chain was
    /// refunded or revoked meanwhile, or Apple's answer is final), with `last_error_code` saying why.
    static func v8(_ d: SQLDialect.DDLWords) -> String {
        """
            CREATE TABLE finish_outbox (
                bundle_id TEXT NOT NULL,
                transaction_id TEXT NOT NULL,
                ownership_key TEXT NOT NULL,
                environment TEXT NOT NULL CHECK (environment IN ('Production', 'Sandbox')),
                created_at \(d.integer) NOT NULL,
                attempts \(d.integer) NOT NULL DEFAULT 0,
                next_attempt_at \(d.integer) NOT NULL,
                finished_at \(d.integer),
                dropped_at \(d.integer),
                last_error_code TEXT,
                PRIMARY KEY (bundle_id, transaction_id)
            )\(d.withoutRowID);
            CREATE INDEX finish_outbox_due ON finish_outbox (next_attempt_at)
                WHERE finished_at IS NULL AND dropped_at IS NULL;
            """
    }

    /// The support desk's view of each attempt: the request id the client was answered with, the app
    /// backend's `X-Client-Version` and what Apple answered; indexed by account and by time for
    /// `GET .../accounts/{account}/history`, `iapgw audit` and the retention purge.
    static let v9 = """
        ALTER TABLE audit_log ADD COLUMN request_id TEXT;
        ALTER TABLE audit_log ADD COLUMN client_version TEXT;
        ALTER TABLE audit_log ADD COLUMN apple_status TEXT;
        CREATE INDEX audit_log_by_account ON audit_log (bundle_id, account, time);
        CREATE INDEX audit_log_by_time ON audit_log (time);
        """

    /// A monthly plan with a commitment: when the commitment ends, kept beside the monthly
    /// `expires_date` (which alone decides access) so every answer can show it. NULL otherwise.
    static func v10(_ d: SQLDialect.DDLWords) -> String {
        """
            ALTER TABLE entitlements ADD COLUMN commitment_expires_date \(d.integer);
            """
    }

    /// The audit verdict `notGranted`: a 200 verify answer whose evidence grants nothing now was
    /// recorded `granted`. PostgreSQL swaps the column's CHECK, `NOT VALID` because the new one is
    /// wider than the old (every stored row passes it) and validating would scan the whole table
    /// under an exclusive lock, past the migration's statement timeout on a large ledger; new rows
    /// are still checked. SQLite cannot alter a CHECK, so the
    /// table is rebuilt with every row and id as they were, its AUTOINCREMENT counter carried over
    /// (an id is never handed out twice, even after a purge of the newest rows) and its indexes made
    /// again. Old rows keep their meaning: `granted` and `refused` are unchanged.
    static func v11(_ dialect: SQLDialect) -> String {
        let verdicts = "CHECK (verdict IN ('granted', 'notGranted', 'refused'))"
        switch dialect {
        case .postgres:
            return """
                ALTER TABLE audit_log DROP CONSTRAINT audit_log_verdict_check;
                ALTER TABLE audit_log ADD CONSTRAINT audit_log_verdict_check \(verdicts) NOT VALID;
                """
        case .sqlite:
            let d = dialect.ddl
            let columns = """
                id, time, bundle_id, account, evidence_kind, evidence_sha256, transaction_ids, product_ids,
                environment, verdict, error_code, adapter, latency_micros, request_id, client_version, apple_status
                """
            return """
                CREATE TABLE audit_log_v11 (
                    \(auditColumns(d, verdicts: verdicts)),
                    request_id TEXT,
                    client_version TEXT,
                    apple_status TEXT
                );
                INSERT INTO audit_log_v11 (\(columns)) SELECT \(columns) FROM audit_log ORDER BY id;
                DELETE FROM sqlite_sequence WHERE name = 'audit_log_v11';
                INSERT INTO sqlite_sequence (name, seq) SELECT 'audit_log_v11', seq FROM sqlite_sequence WHERE name = 'audit_log';
                DROP TABLE audit_log;
                ALTER TABLE audit_log_v11 RENAME TO audit_log;
                CREATE INDEX audit_log_by_app ON audit_log (bundle_id, id);
                CREATE INDEX audit_log_by_account ON audit_log (bundle_id, account, time);
                CREATE INDEX audit_log_by_time ON audit_log (time);
                """
        }
    }

    /// An inbox body is a JWS: base64url of signed JSON (certificates, nested JWS) that pglz cannot
    /// shrink by the quarter it asks for, so PostgreSQL tried, failed and stored it as it was: a
    /// third of its server CPU per accepted notification (profiled: Benchmarks/HISTORY.md). Stored as it is now.
    static func v12(_ d: SQLDialect.DDLWords) -> String {
        d.storeUncompressed("notification_inbox", "raw_body")
    }

    /// The answers of granting calls sent with an `Idempotency-Key`, per app: written in the same
    /// transaction as the work they answer (a claim, a nonce), so a retry of a call whose answer was
    /// lost replays it; kept until `expires_at`. `consumed_by` names the keyed request that used a
    /// nonce, so that request's own retry may present it again.
    static func v13(_ d: SQLDialect.DDLWords) -> String {
        """
            CREATE TABLE idempotent_answers (
                bundle_id TEXT NOT NULL,
                idempotency_key TEXT NOT NULL,
                request_sha256 TEXT NOT NULL CHECK (length(request_sha256) = 64),
                status \(d.integer) NOT NULL,
                body TEXT NOT NULL,
                created_at \(d.integer) NOT NULL,
                expires_at \(d.integer) NOT NULL,
                PRIMARY KEY (bundle_id, idempotency_key)
            )\(d.withoutRowID);
            CREATE INDEX idempotent_answers_by_expiry ON idempotent_answers (expires_at);
            ALTER TABLE nonces ADD COLUMN consumed_by TEXT;
            """
    }

    /// Who holds a finish outbox row's lease, as `v7` did for the webhook outbox: the lease is
    /// renewed by its holder only, and an instance that restarts takes back at once what its previous
    /// incarnation held instead of waiting the lease out.
    static let v14 = """
        ALTER TABLE finish_outbox ADD COLUMN leased_by TEXT;
        CREATE INDEX finish_outbox_by_holder ON finish_outbox (leased_by) WHERE finished_at IS NULL AND dropped_at IS NULL;
        """

    /// The purchase chain of each webhook event (its `originalTransactionId`; NULL for one about no
    /// chain), so a lease can take an event only once every earlier undelivered event of its chain is
    /// due with it or delivered: one chain's events reach the receiver in order, never two at once.
    /// Filled for the events not yet delivered (the only ones the rule reads).
    static func v15(_ dialect: SQLDialect) -> String {
        """
            ALTER TABLE webhook_outbox ADD COLUMN chain_id TEXT;
            UPDATE webhook_outbox SET chain_id = \(dialect.json("event_json")) ->> 'originalTransactionId'
                WHERE delivered_at IS NULL;
            CREATE INDEX webhook_outbox_pending_by_chain ON webhook_outbox (bundle_id, chain_id, seq)
                WHERE delivered_at IS NULL;
            """
    }

    /// Each app's rollout step, read by every instance to route an account the same way, and the
    /// timeline of its advances and rollbacks (`RolloutLedger`).
    static func v16(_ d: SQLDialect.DDLWords) -> String {
        """
            CREATE TABLE rollouts (
                bundle_id TEXT PRIMARY KEY,
                step \(d.integer) NOT NULL,
                percent \(d.integer) NOT NULL CHECK (percent BETWEEN 0 AND 100),
                step_started_at \(d.integer) NOT NULL,
                paused \(d.integer) NOT NULL,
                revision \(d.integer) NOT NULL,
                updated_at \(d.integer) NOT NULL
            )\(d.withoutRowID);
            CREATE TABLE rollout_events (
                seq \(d.autoincrementKey),
                bundle_id TEXT NOT NULL,
                at \(d.integer) NOT NULL,
                action TEXT NOT NULL,
                actor TEXT NOT NULL,
                from_percent \(d.integer) NOT NULL,
                to_percent \(d.integer) NOT NULL,
                reason TEXT NOT NULL,
                purchases_json TEXT NOT NULL
            );
            CREATE INDEX rollout_events_by_app ON rollout_events (bundle_id, at);
            """
    }
}
