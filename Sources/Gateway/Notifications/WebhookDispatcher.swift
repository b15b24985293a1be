import AppleTrust
import Foundation
import IAPConfig
import IAPCore
import Ledger
import UpstreamHTTP

/// Delivers the webhook outbox to each app backend: at least once, each event with its
/// idempotency key, signed `X-IAPGW-Signature: sha256=HEX(HMAC(secret, timestamp + "." + body))`
/// with `X-IAPGW-Timestamp`, retried with exponential backoff while the receiver is down. Up to
/// `concurrency` deliveries to one receiver are in flight at once (`ReceiverSlots`), one per
/// purchase chain: a chain's events go one after the other, in order (the lease hands out none of a
/// chain past an earlier one still undelivered, and a failure holds the rest of its chain back).
/// What became of a batch is recorded in one commit.
public final class WebhookDispatcher: Sendable {
    let apps: [String: AppPolicy]
    let ledger: any NotificationLedger & Ledger
    let client: UpstreamHTTPClient
    let environment: [String: String]
    let logger: Logger
    let now: @Sendable () -> Int64
    let identity: WorkerIdentity
    /// How long an event taken for delivery stays ours without renewal: a crashed instance's events
    /// are due again (for another instance, or its own next incarnation) at most this long after.
    /// Renewed every third of it while a batch is being delivered.
    let leaseMillis: Int64
    /// The wait between renewals and between the attempt watchdog's looks at the lease: real time,
    /// unless a test drives `now` and must drive the waits with it.
    let wait: @Sendable (Duration) async throws -> Void
    /// Deliveries in flight at once to one receiver.
    let concurrency: Int
    let slots: ReceiverSlots

    public init(apps: [String: AppPolicy], ledger: any NotificationLedger & Ledger, client: UpstreamHTTPClient,
                environment: [String: String], logger: Logger, identity: WorkerIdentity = .ephemeral(),
                leaseMillis: Int64 = 10_000, concurrency: Int = 8, now: @escaping @Sendable () -> Int64,
                wait: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }) {
        self.wait = wait
        self.apps = apps
        self.ledger = ledger
        self.client = client
        self.environment = environment
        self.logger = logger
        self.identity = identity
        self.leaseMillis = max(leaseMillis, 3)
        self.concurrency = max(concurrency, 1)
        slots = ReceiverSlots(limit: concurrency)
        self.now = now
    }

    /// The event as JSON, with the account that owns the chain when one does (so the backend
    /// needs no mapping of its own from Apple's ids to its users), and whether its state grants
    /// access under the app's policy.
    static func body(_ event: WebhookEvent, account: String?, policy: AppPolicy.GracePeriodPolicy) -> String {
        var o: [String: JSONValue] = [
            "kind": .string(event.kind.rawValue), "idempotencyKey": .string(event.idempotencyKey),
            "bundleId": .string(event.bundleId), "notificationType": .string(event.notificationType),
            "occurredAt": .int(event.occurredAt),
        ]
        if let v = event.originalTransactionId { o["originalTransactionId"] = .string(v) }
        if let v = event.transactionId { o["transactionId"] = .string(v) }
        if let v = event.productId { o["productId"] = .string(v) }
        if let v = event.state {
            o["state"] = .string(v.rawValue)
            o["grantsAccess"] = .bool(EntitlementAccess.grantsAccess(v, policy: policy))
        }
        if let v = event.expiresDate { o["expiresDate"] = .int(v) }
        if let v = event.subtype { o["subtype"] = .string(v) }
        if let v = event.revocationType { o["revocationType"] = .string(v.rawValue) }
        if let v = event.revocationPercentage { o["revocationPercentage"] = .int(v) }
        if let v = event.commitmentExpiresDate { o["commitmentExpiresDate"] = .int(v) }
        if let v = event.rollout {
            o["rollout"] = .object(["fromPercent": .int(Int64(v.fromPercent)), "toPercent": .int(Int64(v.toPercent)),
                                    "reason": .string(v.reason), "purchases": .array(v.purchases.map { .string($0) })])
        }
        if let account { o["account"] = .string(account) }
        return JSONValue.object(o).jsonText
    }

    public static func signature(secret: String, timestamp: String, body: String) -> String {
        "sha256=" + HMACSHA256.hex(key: Array(secret.utf8), message: Array("\(timestamp).\(body)".utf8))
    }

    /// Events per lease: enough for every delivery slot to be busy several times over, so one
    /// batch's commit is shared by many deliveries.
    var batchSize: Int { concurrency * 8 }

    /// Sends one batch of what is due; returns how many were delivered.
    @discardableResult
    public func deliverDue(limit: Int? = nil) async throws(VerificationError) -> Int {
        let taken = try await ledger.leaseDueWebhooks(now: now(), limit: limit ?? batchSize, leaseMillis: leaseMillis,
                                                      holder: identity.id)
        guard !taken.isEmpty else { return 0 }
        let lease = LeasedBatch(taken.map(\.seq), until: now() + leaseMillis)
        let renewal = Task { await keepRenewing(lease) }
        defer { renewal.cancel() }
        var marks: [WebhookMark] = []
        var unsent: [WebhookMark] = []
        // The lease gives a chain's events in order: grouped, each chain keeps that order.
        var chains: [String: [[OutboxEntry]]] = [:]
        var chainIndex: [String: (receiver: String, index: Int)] = [:]
        for entry in taken {
            guard let webhook = apps[entry.event.bundleId]?.webhook else {
                // No receiver configured (any more): nothing will ever take it, so it is not retried forever.
                unsent.append(.delivered(entry.seq))
                continue
            }
            guard let chain = entry.event.originalTransactionId.map({ entry.event.bundleId + "\u{1F}" + $0 }) else {
                chains[webhook.url, default: []].append([entry])
                continue
            }
            if let (receiver, index) = chainIndex[chain] {
                chains[receiver]![index].append(entry)
            } else {
                chainIndex[chain] = (webhook.url, chains[webhook.url, default: []].count)
                chains[webhook.url, default: []].append([entry])
            }
        }
        await withTaskGroup(of: [WebhookMark].self) { receivers in
            for (receiver, chainsOfReceiver) in chains {
                receivers.addTask { await self.deliver(chainsOfReceiver, to: receiver, lease: lease) }
            }
            for await receiverMarks in receivers { marks += receiverMarks }
        }
        try await ledger.markWebhooks(unsent + marks, holder: identity.id, at: now())
        return marks.count { if case .delivered = $0 { true } else { false } }
    }

    /// The chains of one receiver, each chain's events one after the other, every delivery in one of
    /// the receiver's `concurrency` slots (shared with the other batch in flight).
    private func deliver(_ chains: [[OutboxEntry]], to receiver: String, lease: LeasedBatch<Int64>) async -> [WebhookMark] {
        await withTaskGroup(of: [WebhookMark].self) { group in
            for chain in chains { group.addTask { await self.deliver(chain: chain, to: receiver, lease: lease) } }
            return await group.reduce(into: []) { $0 += $1 }
        }
    }

    /// One chain's events of a batch, in order. The first that is not delivered ends the chain's run:
    /// what follows it is released (due again behind it) or, once the lease may be gone, left alone.
    private func deliver(chain: [OutboxEntry], to receiver: String, lease: LeasedBatch<Int64>) async -> [WebhookMark] {
        var marks: [WebhookMark] = []
        for (position, entry) in chain.enumerated() {
            let rest = { chain[(position + 1)...].map { WebhookMark.released($0.seq) } }
            await slots.acquire(receiver)
            let outcome = await deliver(entry, lease: lease)
            slots.release(receiver)
            switch outcome {
            case .delivered:
                marks.append(.delivered(entry.seq))
            case .failed:
                marks.append(.failed(entry.seq, nextAttemptAt: JobBackoff.nextAttempt(afterAttempts: entry.attempts, now: now())))
                return marks + rest()
            case .leaseLost:
                // The events are someone else's now (or due again): at least once still holds.
                logger.warning("webhook_lease_ran_out", ["bundleId": entry.event.bundleId])
                return marks
            }
        }
        return marks
    }

    private func deliver(_ entry: OutboxEntry, lease: LeasedBatch<Int64>) async -> AttemptOutcome {
        guard let app = apps[entry.event.bundleId], let webhook = app.webhook else { return .delivered }
        let body = Self.body(entry.event, account: entry.owner, policy: app.gracePeriodPolicy)
        let timestamp = String(now() / 1000)
        let secret: String
        do {
            secret = try webhook.secret.resolve(environment: environment)
        } catch {
            // A configuration problem, not the receiver's: say which, and try again later.
            logger.error("webhook_secret_unavailable", ["bundleId": entry.event.bundleId, "code": error.code.rawValue])
            return .failed
        }
        // Once the lease may have run out (a renewal lost, or stalled on storage), another instance
        // may be sending the rest of the batch: this one sends nothing it no longer holds.
        guard lease.holds(entry.seq, now: now(), margin: leaseMillis / 5) else { return .leaseLost }
        let request = UpstreamRequest(method: "POST", url: webhook.url, headers: [
            ("Content-Type", "application/json"), ("Idempotency-Key", entry.event.idempotencyKey),
            ("X-IAPGW-Timestamp", timestamp),
            ("X-IAPGW-Signature", Self.signature(secret: secret, timestamp: timestamp, body: body)),
        ], body: Array(body.utf8))
        let outcome = await attempt(request, seq: entry.seq, lease: lease)
        if outcome == .failed {
            logger.warning("webhook_failed", ["bundleId": entry.event.bundleId, "attempts": String(entry.attempts + 1)])
        }
        return outcome
    }

    /// At start, under a stable identity: the events its previous incarnation held are due now.
    public func reclaimEarlierLeases() async {
        await identity.reclaimEarlierLeases(of: "webhook", logger: logger) { (holder) throws(VerificationError) in
            try await ledger.releaseWebhookLeases(holder: holder, now: now())
        }
    }

    private enum AttemptOutcome: Sendable { case delivered, failed, leaseLost }

    /// One POST, raced against the lease: if the lease may run out before the receiver answers, the
    /// request is aborted, so two instances never send one event at the same time. An answer that
    /// arrived first is the outcome, whatever the lease did meanwhile.
    private func attempt(_ request: UpstreamRequest, seq: Int64, lease: LeasedBatch<Int64>) async -> AttemptOutcome {
        let client = self.client
        let margin = leaseMillis / 5
        // nil: the watchdog's "the lease may run out"; the POST's own outcome otherwise.
        return await withTaskGroup(of: AttemptOutcome?.self) { group in
            group.addTask {
                do {
                    let response = try await client.send(request)
                    return (200..<300).contains(response.status) ? .delivered : .failed
                } catch {
                    return Task.isCancelled ? .leaseLost : .failed
                }
            }
            group.addTask { [now, wait, leaseMillis] in
                // Looks again after each renewal (a third of a lease), and when the lease as last renewed
                // is about to end: a renewal that found the event taken, or none in time, ends the attempt.
                while lease.holds(seq, now: now(), margin: margin) {
                    let left = min(lease.until - margin - now(), leaseMillis / 3)
                    do { try await wait(.milliseconds(max(left, 1))) } catch { break }
                }
                return nil
            }
            // The first to end cancels the other; when it is the watchdog, the aborted POST still reports.
            while let next = await group.next() {
                group.cancelAll()
                if let outcome = next { return outcome }
            }
            return .leaseLost
        }
    }

    private func keepRenewing(_ lease: LeasedBatch<Int64>) async {
        let (ledger, holder) = (ledger, identity.id)
        await lease.keepRenewing(leaseMillis: leaseMillis, now: now, wait: wait, logger: logger,
                                 failure: "webhook_lease_renewal_failed") { (seqs, until) throws(VerificationError) in
            try await ledger.renewWebhookLeases(seqs.sorted(), holder: holder, until: until)
        }
    }

    /// Until cancelled, two batches in flight: while one waits for its last deliveries (and its
    /// commit), the other's take the slots it frees. The lease keeps their chains apart.
    public func run(interval: Duration = .milliseconds(250)) async {
        await reclaimEarlierLeases()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    await repeatUntilCancelled(every: interval, logger: self.logger,
                                               failure: "webhook_dispatch_failed") { () throws(VerificationError) in
                        while try await self.deliverDue() > 0 {}
                    }
                }
            }
        }
    }
}
