import Adapters
import AppleTrust
import Foundation
import HTTPServer
import IAPCore
import Ledger

/// The gateway's HTTP API as a plain async function from request to response: no sockets here, so
/// every route is testable in-process, and `iapgw serve` only puts `HTTPServer` in front of it.
public final class GatewayService: Sendable {
    public let apps: [String: AppPolicy]
    let adapters: AdapterRegistry
    let ledger: any Ledger & NotificationLedger
    let notifications: NotificationDecoder?
    let checks: [any PurchaseCheck]
    let authenticator: APIKeyAuthenticator
    let sealer: AESGCMSealer?
    let logger: Logger
    let now: @Sendable () -> Int64
    /// The process environment the policies' secret references resolve in (readiness re-checks them).
    let environment: [String: String]
    /// Shadow, compare and cutover routing of receipts; nil: receipts take the primary path only.
    let migration: MigrationRouter?
    /// Where the comparisons route reads from; nil: the route answers 404.
    let comparisons: (any ComparisonLedger)?
    /// Shared with the upstream HTTP client (as its observer) when the assembly builds both.
    public let metrics: GatewayMetrics
    /// What `/metrics` reports from storage, without waiting on it.
    let storageGauges: StorageGauges
    /// The per-app JWS verifiers the Server API adapter and notifications share (chain-cache gauges).
    let jwsVerifiers: AppVerifiers?

    public init(apps: [String: AppPolicy], adapters: AdapterRegistry, ledger: any Ledger & NotificationLedger,
                notifications: NotificationDecoder? = nil,
                checks: [any PurchaseCheck] = .standard, receiptSealer: AESGCMSealer?,
                environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger = .disabled,
                now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) },
                migration: MigrationRouter? = nil, comparisons: (any ComparisonLedger)? = nil,
                metrics: GatewayMetrics = GatewayMetrics(), jwsVerifiers: AppVerifiers? = nil) {
        self.metrics = metrics
        self.jwsVerifiers = jwsVerifiers
        self.migration = migration
        self.comparisons = comparisons
        self.apps = apps
        self.adapters = adapters
        self.ledger = ledger
        self.notifications = notifications
        self.checks = checks
        self.authenticator = APIKeyAuthenticator(environment: environment)
        self.environment = environment
        self.sealer = receiptSealer
        self.logger = logger
        self.now = now
        let bundleIds = apps.keys.sorted()
        storageGauges = StorageGauges { () async throws(VerificationError) -> String in
            try await Self.storageGauges(ledger: ledger, comparisons: comparisons, bundleIds: bundleIds)
        }
    }

    /// The one entry point: route, authenticate, run, and turn every refusal into its JSON error.
    public func handle(_ request: HTTPRequest) async -> HTTPResponse {
        // Every log line of this request, from any component, carries its id.
        await Logger.$requestId.withValue(request.requestId) { await handleWithinRequest(request) }
    }

    private func handleWithinRequest(_ request: HTTPRequest) async -> HTTPResponse {
        let log = logger
        let started = DispatchTime.now().uptimeNanoseconds
        let route = Route.match(method: request.method, segments: request.pathSegments)
        var response: HTTPResponse
        do {
            response = try await dispatch(route, request, log)
        } catch {
            response = ErrorResponses.response(error, requestId: request.requestId)
            // A refused client is routine (info); a gateway that cannot serve anyone (bad config, Apple
            // refusing our credentials, storage down) must reach an operator's alerting.
            let level: Logger.Level = response.status >= 500 ? (response.status == 503 ? .warning : .error) : .info
            var fields = ["route": route.name, "code": error.code.rawValue, "status": String(response.status)]
            // The client got a plain sentence for a 5xx; what really happened is for the operator.
            if response.status >= 500 { fields["detail"] = error.message }
            log.log(level, "request_refused", fields)
        }
        metrics.record(route: route.name, status: response.status,
                       micros: (DispatchTime.now().uptimeNanoseconds - started) / 1000)
        return response
    }

    private func dispatch(_ route: Route, _ request: HTTPRequest, _ log: Logger) async throws(VerificationError)
        -> HTTPResponse {
        switch route {
        case .health:
            return .json(200, #"{"status":"ok"}"#)
        case .ready:
            try await ledger.ping()
            // A trust root or secret that became unreadable since start makes every verification of
            // its app fail: not ready. The probe is public, so the details go to the log only.
            let problems = configurationProblems()
            guard problems.isEmpty else {
                for problem in problems { log.error("not_ready", problem) }
                return .json(503, #"{"status":"not ready","reason":"configuration"}"#)
            }
            return .json(200, #"{"status":"ready"}"#)
        case .openAPI:
            return .json(200, OpenAPIDocument.json)
        case .metrics:
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/plain; version=0.0.4")],
                                body: Array((metrics.prometheusText() + (await storageGauges.text()) + chainCacheGauges()).utf8))
        case .dashboard:
            // The app comes from the query (the page has one URL for every app); its own key opens it.
            let app = try authorizedApp(try DashboardEndpoint.bundleId(request), request)
            guard let comparisons else { throw VerificationError(.notFound, "comparisons are not enabled") }
            return try await DashboardEndpoint.answer(request, app: app, ledger: comparisons)
        case .issueNonce(let bundleId):
            let app = try authorizedApp(bundleId, request)
            let account = try RequestBody(request, allowed: ["account"]).account()
            let nonce = try await ledger.issueNonce(bundleId: bundleId, account: account,
                                              ttlSeconds: Int(app.noncePolicy.ttlSeconds), now: now())
            return .json(200, JSONValue.object(["nonce": .string(nonce.value), "expiresAt": .int(nonce.expiresAt)]).jsonText)
        case .verify(let bundleId):
            let app = try authorizedApp(bundleId, request)
            return try await verify(request, app: app, log: log)
        case .entitlements(let bundleId, let account):
            let app = try authorizedApp(bundleId, request)
            try RequestBody.validateAccount(account)
            let now = now()
            let entitlements = try await ledger.entitlements(bundleId: app.bundleId, account: account)
            return .json(200, JSONValue.object([
                "account": .string(account),
                "entitlements": .array(entitlements.map { Self.json(EntitlementAccess.current($0, now: now), policy: app) }),
            ]).jsonText)
        case .comparisons(let bundleId):
            let app = try authorizedApp(bundleId, request)
            guard let comparisons else { throw VerificationError(.notFound, "comparisons are not enabled") }
            return try await ComparisonsEndpoint.answer(request, app: app, ledger: comparisons)
        case .cutoverImpact(let bundleId):
            let app = try authorizedApp(bundleId, request)
            guard let comparisons else { throw VerificationError(.notFound, "comparisons are not enabled") }
            return try await CutoverImpactEndpoint.answer(request, app: app, ledger: comparisons)
        case .notification(let bundleId):
            return try await receiveNotification(request, bundleId: bundleId, log: log)
        case .methodNotAllowed(let allowed):
            var response = ErrorResponses.response(VerificationError(.methodNotAllowed, "this path takes \(allowed) only"),
                                                   requestId: request.requestId)
            response.headers.append(("Allow", allowed))
            return response
        case .notFound:
            throw VerificationError(.notFound, "no such route")
        }
    }

    /// What the policies need and cannot read now: trust roots and secret references (never values).
    func configurationProblems() -> [[String: String]] {
        apps.values.sorted { $0.bundleId < $1.bundleId }.flatMap { app in
            app.diagnostics(environment: environment).map { ["bundleId": app.bundleId, "problem": $0.message] }
        }
    }

    /// Gauges read from the ledger: inbox and outbox depth, and per app the migration comparisons
    /// and how many agreed (app labels are configured bundle ids: bounded).
    static func storageGauges(ledger: any Ledger & NotificationLedger, comparisons: (any ComparisonLedger)?,
                              bundleIds: [String]) async throws(VerificationError) -> String {
        let inbox = try await ledger.inboxDepth()
        var out = "# HELP iapgw_inbox_entries Notification inbox entries by state.\n# TYPE iapgw_inbox_entries gauge\n"
        out += "iapgw_inbox_entries{state=\"pending\"} \(inbox.pending)\n"
        out += "iapgw_inbox_entries{state=\"retrying\"} \(inbox.retrying)\n"
        out += "iapgw_inbox_entries{state=\"parked\"} \(inbox.parked)\n"
        out += "# HELP iapgw_outbox_depth Webhook events not yet delivered.\n# TYPE iapgw_outbox_depth gauge\n"
        out += "iapgw_outbox_depth \(try await ledger.outboxDepth())\n"
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

    /// The verified-chain cache of every JWS verifier (one per app, for the Server API adapter and
    /// notifications alike).
    private func chainCacheGauges() -> String {
        let (hits, misses) = jwsVerifiers?.chainCacheCounts ?? (0, 0)
        var out = "# HELP iapgw_chain_cache_lookups_total Verified certificate-chain cache lookups.\n"
        out += "# TYPE iapgw_chain_cache_lookups_total counter\n"
        out += "iapgw_chain_cache_lookups_total{result=\"hit\"} \(hits)\n"
        out += "iapgw_chain_cache_lookups_total{result=\"miss\"} \(misses)\n"
        return out
    }

    private func authorizedApp(_ bundleId: String, _ request: HTTPRequest) throws(VerificationError) -> AppPolicy {
        guard let app = apps[bundleId] else { throw VerificationError(.unknownApp, "no app \(bundleId.prefix(200)) is configured") }
        try authenticator.authenticate(request, app: app)
        return app
    }

    // MARK: POST /v1/notifications/{bundleId}

    /// Public (Apple calls it): trust comes from signatures only. Answers 200 only once the
    /// notification is durably in the inbox; a duplicate delivery answers 200 and changes nothing.
    /// Processing happens later, off the request (`NotificationProcessor`).
    private func receiveNotification(_ request: HTTPRequest, bundleId: String, log: Logger) async throws(VerificationError)
        -> HTTPResponse {
        guard let app = apps[bundleId] else { throw VerificationError(.unknownApp, "no app \(bundleId.prefix(200)) is configured") }
        guard let notifications else { throw VerificationError(.notFound, "notifications are not enabled") }
        var decoded: DecodedNotification
        do throws(VerificationError) {
            decoded = try notifications.decode(body: request.body, app: app)
            if let receipt = decoded.v1LatestReceipt {
                // A V1 body is a trigger only: Apple's answer about its receipt is what gets applied.
                guard let legacy = adapters.adapter(.verifyReceipt) else {
                    throw VerificationError(.invalidConfiguration, "V1 notifications need the verifyReceipt adapter")
                }
                // Judged by the notification rule: the receipt of a sandbox account's purchase names no account.
                let outcome = try await legacy.verify(.appReceipt(base64: receipt, nonce: nil), account: "", for: app.forNotifications)
                decoded.event = NotificationDecoder.v1Event(decoded, bundleId: app.bundleId, transactions: outcome.transactions,
                                                            renewals: outcome.renewals)
                decoded.signedDate = decoded.event?.signedDate ?? now()
            }
        } catch {
            metrics.recordRefusal(code: error.code.rawValue)
            log.warning("notification_refused", ["bundleId": app.bundleId, "code": error.code.rawValue])
            throw error
        }
        let fresh = try await ledger.enqueue(InboxEntry(
            id: decoded.id, bundleId: app.bundleId, version: decoded.version,
            notificationType: decoded.notificationType.rawValue, subtype: decoded.subtype?.rawValue,
            signedDate: decoded.signedDate, environment: decoded.environment.rawValue, receivedAt: now(),
            rawBody: Data(decoded.storedBody), event: decoded.event))
        log.info("notification_accepted", ["bundleId": app.bundleId, "type": decoded.notificationType.rawValue,
                                           "duplicate": String(!fresh)])
        return .json(200, JSONValue.object(["status": .string(fresh ? "accepted" : "duplicate"),
                                            "notificationId": .string(decoded.id)]).jsonText)
    }

    // MARK: POST /v1/apps/{bundleId}/verify

    private func verify(_ request: HTTPRequest, app: AppPolicy, log: Logger) async throws(VerificationError) -> HTTPResponse {
        let body = try RequestBody(request, allowed: ["account", "receipt", "transactionId", "signedTransaction", "nonce"])
        let account = try body.account()
        let evidence = try body.evidence()
        let started = DispatchTime.now().uptimeNanoseconds
        var audit = AuditRecord(time: now(), bundleId: app.bundleId, account: account,
                                evidenceKind: evidence.kind.rawValue, evidenceSHA256: Self.evidenceDigest(evidence),
                                transactionIds: [], productIds: [], environment: nil, verdict: .refused,
                                errorCode: nil, adapter: nil, latencyMicros: 0)
        do {
            // The granted record is written by the claim itself, in its transaction.
            let result = try await verifyAndClaim(evidence, account: account, app: app, audit: &audit,
                                                  started: started, log: log)
            log.info("verified", ["bundleId": app.bundleId, "adapter": audit.adapter ?? "", "evidence": evidence.kind.rawValue,
                                  "transactions": String(audit.transactionIds.count)])
            return .json(200, result.jsonText)
        } catch {
            audit.errorCode = error.code
            audit.latencyMicros = Int64((DispatchTime.now().uptimeNanoseconds - started) / 1000)
            await recordAudit(audit, log)
            metrics.recordRefusal(code: error.code.rawValue)
            throw error
        }
    }

    private func verifyAndClaim(_ evidence: PurchaseEvidence, account: String, app: AppPolicy,
                                audit: inout AuditRecord, started: UInt64, log: Logger)
        async throws(VerificationError) -> JSONValue {
        if case .appReceipt(_, let nonce) = evidence {
            // Consumed before Apple is asked: a nonce buys one attempt, so a replay race cannot win twice.
            if let nonce {
                try await ledger.consumeNonce(nonce, bundleId: app.bundleId, account: account, now: now())
            } else if app.noncePolicy.requiredForReceipts {
                throw VerificationError(.nonceRequired, "\(app.bundleId) requires a nonce with every receipt")
            }
        }
        let outcome: AdapterOutcome
        var comparison: PurchaseComparison?
        if let migration, MigrationRouter.applies(to: evidence, app: app) {
            let answer = try await migration.run(evidence, account: account, app: app, adapters: adapters,
                                                 evidenceSHA256: audit.evidenceSHA256)
            audit.adapter = answer.answeringAdapter.rawValue
            comparison = answer.comparison
            outcome = try answer.outcome.get()
        } else {
            let adapter = try adapters.primary(for: evidence, app: app)
            audit.adapter = adapter.id.rawValue
            outcome = try await adapter.verify(evidence, account: account, for: app)
        }
        audit.environment = outcome.environment.rawValue
        audit.transactionIds = outcome.transactions.map(\.transactionId)
        audit.productIds = Array(Set(outcome.transactions.map(\.productId))).sorted()

        let context = ClaimContext(app: app, account: account, evidenceKind: evidence.kind, now: now())
        try checks.run(outcome, context)

        let entitlements = EntitlementCalculator.entitlements(account: account, transactions: outcome.transactions,
                                                              renewals: outcome.renewals, now: context.now)
        var granted = audit
        granted.verdict = .granted
        granted.latencyMicros = Int64((DispatchTime.now().uptimeNanoseconds - started) / 1000)
        // One ledger step: refuses a chain refunded after this evidence was signed, binds, grants,
        // audits, and reads back the ledger's view (a newer notification may already know better).
        let claim = try await ledger.claim(PurchaseClaim(bundleId: app.bundleId, account: account,
                                                   transactions: outcome.transactions, entitlements: entitlements,
                                                   now: context.now, factTimes: Self.factTimes(outcome, now: context.now),
                                                   presentedTransactionId: outcome.presentedTransactionId,
                                                   audit: granted))
        audit = granted
        if let latest = outcome.latestReceipt { await keepLatestReceipt(latest, app: app, outcome: outcome, log: log) }
        // Refunded and revoked purchases are answered as such, never as granted (a backend that
        // credits per newly granted id must not pay out a refund).
        let revoked = Set(outcome.transactions.filter { $0.revocationDate != nil }.map(\.transactionId))
        let chains = Set(entitlements.map(\.originalTransactionId))
        // As they stand now: the claim stored facts, the clock may have ended some since they were signed.
        let stored = claim.entitlements.filter { chains.contains($0.originalTransactionId) }
            .map { EntitlementAccess.current($0, now: context.now) }
        var answer: [String: JSONValue] = [
            "account": .string(account),
            "verdict": .string(VerifyVerdict.of(stored, policy: app.gracePeriodPolicy).rawValue),
            "adapter": .string(outcome.adapter.rawValue),
            "environment": .string(outcome.environment.rawValue),
            "mappingVersion": .string(outcome.mappingVersion),
            "transactions": .array(outcome.transactions.map(\.jsonValue)),
            "newlyGranted": .array(claim.newlyGranted.filter { !revoked.contains($0) }.map(JSONValue.string)),
            "alreadyGranted": .array(claim.alreadyGranted.filter { !revoked.contains($0) }.map(JSONValue.string)),
            "revoked": .array(outcome.transactions.map(\.transactionId).filter { revoked.contains($0) }.map(JSONValue.string)),
            "entitlements": .array(stored.map { Self.json($0, policy: app) }),
        ]
        if let comparison { answer["comparison"] = MigrationRouter.json(comparison) }
        return .object(answer)
    }

    /// When Apple stated each chain's facts: a live answer (verifyReceipt, Server API lookups) is
    /// `now`'s truth; a signed transaction checked locally only is as old as its `signedDate`.
    static func factTimes(_ outcome: AdapterOutcome, now: Int64) -> [String: Int64] {
        var times: [String: Int64] = [:]
        for t in outcome.transactions {
            let chain = t.originalTransactionId ?? t.transactionId
            let time = t.signedDate ?? now
            times[chain] = max(times[chain] ?? time, time)
        }
        return times
    }

    /// The newest legacy receipt, sealed with the gateway's key and bound to its row, for apps that
    /// stay on verifyReceipt and are re-verified later. Never logged; skipped without a key.
    private func keepLatestReceipt(_ receipt: String, app: AppPolicy, outcome: AdapterOutcome, log: Logger) async {
        guard let sealer else { return }
        let chains = Set(outcome.transactions.compactMap { $0.originalTransactionId ?? $0.transactionId })
        for chain in chains.sorted() {
            let binding = Array("\(app.bundleId)\0\(chain)".utf8)
            do {
                let sealed = try sealer.seal(Array(receipt.utf8), associatedData: binding)
                try await ledger.storeLatestReceipt(bundleId: app.bundleId, originalTransactionId: chain, sealedReceipt: Data(sealed))
            } catch {
                // The grant stands (Apple said yes); only later re-verification of this chain is lost.
                metrics.recordLostWrite("latest_receipt")
                log.error("latest_receipt_not_kept", ["bundleId": app.bundleId, "code": error.code.rawValue])
            }
        }
    }

    /// An audit row that cannot be written is logged and counted: loud, but not a reason to take
    /// back an answer Apple already gave. A refusal because storage is unavailable is not written
    /// at all: the write would wait out the storage deadline a second time before the client hears.
    private func recordAudit(_ record: AuditRecord, _ log: Logger) async {
        do throws(VerificationError) {
            if record.errorCode == .storageUnavailable {
                throw VerificationError(.storageUnavailable, "storage is unavailable")
            }
            try await ledger.recordAudit(record)
        } catch {
            metrics.recordLostWrite("audit")
            log.error("audit_not_written", ["bundleId": record.bundleId, "code": error.code.rawValue])
        }
    }

    /// The audit trail keeps a digest of the evidence, never the evidence.
    static func evidenceDigest(_ evidence: PurchaseEvidence) -> String {
        let text: String = switch evidence {
        case .appReceipt(let base64, _): base64
        case .transactionId(let id): id
        case .signedTransaction(let jws): jws
        }
        return SHA256Digest.lowercaseHex(text)
    }

    /// `e` must already stand at the answer's time (`EntitlementAccess.current`).
    static func json(_ e: Entitlement, policy: AppPolicy) -> JSONValue {
        var object: [String: JSONValue] = [
            "productId": .string(e.productId), "state": .string(e.state.rawValue),
            "originalTransactionId": .string(e.originalTransactionId), "source": .string(e.source),
            "grantsAccess": .bool(EntitlementAccess.grantsAccess(e.state, policy: policy.gracePeriodPolicy)),
        ]
        if let expires = e.expiresDate { object["expiresDate"] = .int(expires) }
        return .object(object)
    }
}
