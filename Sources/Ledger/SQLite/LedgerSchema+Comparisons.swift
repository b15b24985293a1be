extension LedgerSchema {
    /// Migration side by side: one row per comparison, one row per unexplained difference.
    /// `agreed` is denormalised so agreement counts need no join.
    static let v3 = """
        CREATE TABLE comparisons (
            id TEXT PRIMARY KEY,
            bundle_id TEXT NOT NULL,
            compared_at INTEGER NOT NULL,
            evidence_kind TEXT NOT NULL,
            evidence_sha256 TEXT NOT NULL,
            legacy_mapping_version TEXT,
            server_api_mapping_version TEXT,
            transaction_count INTEGER NOT NULL,
            legacy_error TEXT,
            server_api_error TEXT,
            agreed INTEGER NOT NULL CHECK (agreed IN (0, 1)),
            product_ids TEXT NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX comparisons_by_app ON comparisons (bundle_id, compared_at);

        CREATE TABLE comparison_differences (
            comparison_id TEXT NOT NULL REFERENCES comparisons (id),
            position INTEGER NOT NULL,
            kind TEXT NOT NULL,
            transaction_id TEXT NOT NULL,
            product_id TEXT,
            field TEXT,
            legacy_value TEXT,
            server_api_value TEXT,
            PRIMARY KEY (comparison_id, position)
        ) WITHOUT ROWID;
        CREATE INDEX comparison_differences_by_kind ON comparison_differences (kind, field);
        """

    /// Cutover verdict: who and where each comparison is about, and one row per purchase chain with
    /// the entitlement each path derives, so readiness counts chains (not comparisons) and the
    /// cutover impact is read from the ledger. Comparisons stored before have no chains: they count
    /// as failures only when a path failed, never as agreed chains.
    static let v6 = """
        ALTER TABLE comparisons ADD COLUMN account TEXT;
        ALTER TABLE comparisons ADD COLUMN environment TEXT;
        ALTER TABLE comparisons ADD COLUMN app_version TEXT;

        CREATE TABLE comparison_purchases (
            comparison_id TEXT NOT NULL REFERENCES comparisons (id),
            original_transaction_id TEXT NOT NULL,
            product_id TEXT NOT NULL,
            product_type TEXT,
            legacy_state TEXT,
            legacy_expires_at INTEGER,
            server_api_state TEXT,
            server_api_expires_at INTEGER,
            agreed INTEGER NOT NULL CHECK (agreed IN (0, 1)),
            PRIMARY KEY (comparison_id, original_transaction_id)
        ) WITHOUT ROWID;
        """
}
