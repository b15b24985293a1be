extension LedgerSchema {
    /// Notifications: inbox, subscription states, webhook outbox, consumption requests.
    /// JSON columns hold the IAPCore model's Codable form with sorted keys.
    static func v2(_ d: SQLDialect.DDLWords) -> String {
        """
            -- One row per delivered notification, kept after processing (audit, replay); raw_body is
            -- NULL once retention purged it. An entry is due when processed_at and parked_at are NULL
            -- and next_attempt_at has passed.
            CREATE TABLE notification_inbox (
                seq \(d.autoincrementKey),
                bundle_id TEXT NOT NULL,
                notification_id TEXT NOT NULL,
                version TEXT NOT NULL CHECK (version IN ('1', '2')),
                notification_type TEXT NOT NULL,
                subtype TEXT,
                signed_date \(d.integer) NOT NULL,
                environment TEXT NOT NULL,
                received_at \(d.integer) NOT NULL,
                raw_body \(d.blob),
                event_json TEXT,
                processed_at \(d.integer),
                unknown_type \(d.integer) NOT NULL DEFAULT 0,
                attempts \(d.integer) NOT NULL DEFAULT 0,
                next_attempt_at \(d.integer) NOT NULL DEFAULT 0,
                last_error_code TEXT,
                parked_at \(d.integer),
                UNIQUE (bundle_id, notification_id)
            );
            CREATE INDEX notification_inbox_due ON notification_inbox (signed_date, received_at, seq)
                WHERE processed_at IS NULL AND parked_at IS NULL;
            CREATE INDEX notification_inbox_by_app ON notification_inbox (bundle_id, signed_date);
            CREATE INDEX notification_inbox_by_receipt ON notification_inbox (received_at) WHERE raw_body IS NOT NULL;

            -- The lifecycle's view of each purchase chain; the columns beside state_json serve
            -- reconciliation's queries (near expiry, billing retry).
            CREATE TABLE subscription_states (
                bundle_id TEXT NOT NULL,
                original_transaction_id TEXT NOT NULL,
                product_id TEXT NOT NULL,
                state TEXT NOT NULL,
                expires_date \(d.integer),
                last_signed_date \(d.integer) NOT NULL,
                state_json TEXT NOT NULL,
                updated_at \(d.integer) NOT NULL,
                PRIMARY KEY (bundle_id, original_transaction_id)
            )\(d.withoutRowID);
            CREATE INDEX subscription_states_by_expiry ON subscription_states (state, expires_date);

            -- Delivered rows stay: they are what makes a re-applied event a no-op here.
            CREATE TABLE webhook_outbox (
                seq \(d.autoincrementKey),
                bundle_id TEXT NOT NULL,
                idempotency_key TEXT NOT NULL,
                event_json TEXT NOT NULL,
                created_at \(d.integer) NOT NULL,
                attempts \(d.integer) NOT NULL DEFAULT 0,
                next_attempt_at \(d.integer) NOT NULL,
                delivered_at \(d.integer),
                UNIQUE (bundle_id, idempotency_key)
            );
            CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at, seq) WHERE delivered_at IS NULL;

            CREATE TABLE consumption_requests (
                bundle_id TEXT NOT NULL,
                transaction_id TEXT NOT NULL,
                original_transaction_id TEXT,
                requested_at \(d.integer) NOT NULL,
                answered_at \(d.integer),
                PRIMARY KEY (bundle_id, transaction_id)
            )\(d.withoutRowID);
            CREATE INDEX consumption_requests_pending ON consumption_requests (requested_at) WHERE answered_at IS NULL;
            """
    }
}
