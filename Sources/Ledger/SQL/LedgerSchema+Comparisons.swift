extension LedgerSchema {
    /// Migration side by side: one row per comparison, one row per unexplained difference.
    /// `agreed` is denormalised so agreement counts need no join.
    static func v3(_ d: SQLDialect.DDLWords) -> String {
        """
            CREATE TABLE comparisons (
                id TEXT PRIMARY KEY,
                bundle_id TEXT NOT NULL,
                compared_at \(d.integer) NOT NULL,
                evidence_kind TEXT NOT NULL,
                evidence_sha256 TEXT NOT NULL,
                legacy_mapping_version TEXT,
                server_api_mapping_version TEXT,
                transaction_count \(d.integer) NOT NULL,
                legacy_error TEXT,
                server_api_error TEXT,
                agreed \(d.integer) NOT NULL CHECK (agreed IN (0, 1)),
                product_ids TEXT NOT NULL
            )\(d.withoutRowID);
            CREATE INDEX comparisons_by_app ON comparisons (bundle_id, compared_at);

            CREATE TABLE comparison_differences (
                comparison_id TEXT NOT NULL REFERENCES comparisons (id),
                position \(d.integer) NOT NULL,
                kind TEXT NOT NULL,
                transaction_id TEXT NOT NULL,
                product_id TEXT,
                field TEXT,
                legacy_value TEXT,
                server_api_value TEXT,
                PRIMARY KEY (comparison_id, position)
            )\(d.withoutRowID);
            CREATE INDEX comparison_differences_by_kind ON comparison_differences (kind, field);
            """
    }

    /// Cutover verdict: who and where each comparison is about, and one row per purchase chain with
    /// the entitlement each path derives, so readiness counts chains (not comparisons) and the
    /// cutover impact is read from the ledger. Comparisons stored before have no chains: they count
    /// as failures only when a path failed, never as agreed chains.
    static func v6(_ d: SQLDialect.DDLWords) -> String {
        """
            ALTER TABLE comparisons ADD COLUMN account TEXT;
            ALTER TABLE comparisons ADD COLUMN environment TEXT;
            ALTER TABLE comparisons ADD COLUMN app_version TEXT;

            CREATE TABLE comparison_purchases (
                comparison_id TEXT NOT NULL REFERENCES comparisons (id),
                original_transaction_id TEXT NOT NULL,
                product_id TEXT NOT NULL,
                product_type TEXT,
                legacy_state TEXT,
                legacy_expires_at \(d.integer),
                server_api_state TEXT,
                server_api_expires_at \(d.integer),
                agreed \(d.integer) NOT NULL CHECK (agreed IN (0, 1)),
                PRIMARY KEY (comparison_id, original_transaction_id)
            )\(d.withoutRowID);
            """
    }
}
