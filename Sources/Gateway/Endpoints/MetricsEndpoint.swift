import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// GET /metrics: the Prometheus text of the gateway: request and upstream metrics, the storage
/// gauges (never waited on for long, `StorageGauges`), the verified-chain caches, the log lines
/// dropped and the secret files' refreshes.
struct MetricsEndpoint: Sendable {
    typealias ChainCacheCounts = @Sendable () -> (hits: Int, misses: Int)

    let metrics: GatewayMetrics
    let storageGauges: StorageGauges
    /// The verified-chain cache of every JWS verifier (Server API adapter and notifications).
    let chainCaches: [ChainCacheCounts]
    /// The log's output writer (none when the log goes elsewhere, e.g. captured by tests: 0 dropped).
    let logWriter: LogWriter?
    /// The expiry dates of the trust roots, TLS certificate and keys (`ExpiryGauges`).
    let expiryGauges: String

    /// `rolloutApps`: the apps whose receipts are routed by a rollout (their step and rollbacks are gauges).
    init(metrics: GatewayMetrics, ledger: any Ledger & NotificationLedger, comparisons: (any ComparisonLedger)?,
         bundleIds: [String], rolloutApps: [String] = [], chainCaches: [ChainCacheCounts], logWriter: LogWriter?,
         expiryGauges: String = "", readiness: ReadinessEndpoint? = nil) {
        self.metrics = metrics
        self.chainCaches = chainCaches
        self.logWriter = logWriter
        self.expiryGauges = expiryGauges
        storageGauges = StorageGauges { () async throws(VerificationError) -> String in
            let health = await HealthGauges.read(ledger: ledger, readiness: readiness)
            guard health.storageUp else { return health.text }
            return health.text + (try await Self.storageGauges(ledger: ledger, comparisons: comparisons, bundleIds: bundleIds,
                                                               rolloutApps: rolloutApps))
        }
    }

    func answer() async -> HTTPResponse {
        HTTPResponse(status: 200, headers: [("Content-Type", "text/plain; version=0.0.4")],
                     body: Array((metrics.prometheusText() + (await storageGauges.text()) + chainCacheGauges() + logGauges()
                                  + secretGauges() + expiryGauges).utf8))
    }

    /// Gauges read from the ledger: inbox and outbox depth, and per app the migration comparisons
    /// and how many agreed (app labels are configured bundle ids: bounded).
    static func storageGauges(ledger: any Ledger & NotificationLedger, comparisons: (any ComparisonLedger)?,
                              bundleIds: [String], rolloutApps: [String] = []) async throws(VerificationError) -> String {
        let inbox = try await ledger.inboxDepth()
        var out = "# HELP iapgw_inbox_entries Notification inbox entries by state.\n# TYPE iapgw_inbox_entries gauge\n"
        out += "iapgw_inbox_entries{state=\"pending\"} \(inbox.pending)\n"
        out += "iapgw_inbox_entries{state=\"retrying\"} \(inbox.retrying)\n"
        out += "iapgw_inbox_entries{state=\"parked\"} \(inbox.parked)\n"
        out += "# HELP iapgw_outbox_depth Webhook events not yet delivered.\n# TYPE iapgw_outbox_depth gauge\n"
        out += "iapgw_outbox_depth \(try await ledger.outboxDepth())\n"
        if let rollouts = ledger as? any RolloutLedger, !rolloutApps.isEmpty {
            out += "# HELP iapgw_rollout_percent The share of accounts a receipt rollout answers by the Server API now.\n"
                + "# TYPE iapgw_rollout_percent gauge\n"
            var rollbacks = "# HELP iapgw_rollout_rollbacks_total Rollbacks of a receipt rollout (by its guard or an operator).\n"
                + "# TYPE iapgw_rollout_rollbacks_total counter\n"
            for bundleId in rolloutApps {
                out += "iapgw_rollout_percent{app=\"\(bundleId)\"} \(try await rollouts.rolloutState(bundleId: bundleId)?.percent ?? 0)\n"
                rollbacks += "iapgw_rollout_rollbacks_total{app=\"\(bundleId)\"} \(try await rollouts.rolloutRollbacks(bundleId: bundleId))\n"
            }
            out += rollbacks
        }
        if let finishes = ledger as? any FinishLedger {
            let depth = try await finishes.finishOutboxDepth()
            out += "# HELP iapgw_finish_outbox_rows Finish Transaction rows still to send, and those that failed for good.\n"
            out += "# TYPE iapgw_finish_outbox_rows gauge\n"
            out += "iapgw_finish_outbox_rows{state=\"pending\"} \(depth.pending)\n"
            out += "iapgw_finish_outbox_rows{state=\"failed\"} \(depth.failed)\n"
        }
        if let comparisons {
            out += "# HELP iapgw_comparisons Stored migration comparisons by app and outcome.\n# TYPE iapgw_comparisons gauge\n"
            for bundleId in bundleIds {
                let counts = try await comparisons.comparisonCounts(bundleId: bundleId, from: nil, to: nil)
                out += "iapgw_comparisons{app=\"\(bundleId)\",outcome=\"agreed\"} \(counts.agreed)\n"
                out += "iapgw_comparisons{app=\"\(bundleId)\",outcome=\"disagreed\"} \(counts.total - counts.agreed)\n"
            }
        }
        return out
    }

    private func chainCacheGauges() -> String {
        let counts = chainCaches.map { $0() }
        var out = "# HELP iapgw_chain_cache_lookups_total Verified certificate-chain cache lookups.\n"
        out += "# TYPE iapgw_chain_cache_lookups_total counter\n"
        out += "iapgw_chain_cache_lookups_total{result=\"hit\"} \(counts.reduce(0) { $0 + $1.hits })\n"
        out += "iapgw_chain_cache_lookups_total{result=\"miss\"} \(counts.reduce(0) { $0 + $1.misses })\n"
        return out
    }

    private func logGauges() -> String {
        "# HELP iapgw_log_lines_dropped_total Log lines dropped because the log output did not keep up (or failed).\n"
            + "# TYPE iapgw_log_lines_dropped_total counter\n"
            + "iapgw_log_lines_dropped_total \(logWriter?.droppedLines ?? 0)\n"
    }

    private func secretGauges() -> String {
        "# HELP iapgw_secret_refresh_failures_total Reads of a secret file that failed (its last good value kept).\n"
            + "# TYPE iapgw_secret_refresh_failures_total counter\n"
            + "iapgw_secret_refresh_failures_total \(SecretFiles.shared.refreshFailures)\n"
            + "# HELP iapgw_secret_files_stale Secret files whose last read failed.\n# TYPE iapgw_secret_files_stale gauge\n"
            + "iapgw_secret_files_stale \(SecretFiles.shared.staleFiles)\n"
    }
}

extension MetricsEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route(method: "GET", path: "/metrics", name: "metrics",
              operation: OpenAPIOperation(summary: "Prometheus metrics",
                                          responses: ["200": .object(["description": "text/plain metrics"])]),
              handler: .open { endpoints, _, _ in await endpoints.metrics.answer() }),
    ]
}
