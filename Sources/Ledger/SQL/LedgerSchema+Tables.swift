extension LedgerSchema {
    /// Every table of the ledger that holds its rows, parents before the tables whose foreign keys
    /// name them: what a backup reports and `iapgw migrate-storage` copies, in this order. The
    /// schema's bookkeeping (`schema_migrations`) is not in it: each database keeps its own. A table
    /// added by a migration goes here too (`LedgerTableListTests` compares this with a migrated file).
    public static let tables: [String] = [
        "nonces", "ownership", "transactions", "entitlements", "latest_receipts", "audit_log", "leases",
        "comparisons", "comparison_differences", "comparison_purchases",
        "notification_inbox", "subscription_states", "webhook_outbox", "consumption_requests",
        "finish_outbox", "idempotent_answers", "rollouts", "rollout_events",
    ]

    /// The tables an engine keeps for itself (never the ledger's rows).
    static let engineTables: Set<String> = ["schema_migrations", "sqlite_sequence"]
}
