import AppleTrust
import Foundation
import IAPCore
import Ledger
import UpstreamHTTP

/// Delivers the webhook outbox to each app backend: at least once, each event with its
/// idempotency key, signed `X-IAPGW-Signature: sha256=HEX(HMAC(secret, timestamp + "." + body))`
/// with `X-IAPGW-Timestamp`, retried with exponential backoff while the receiver is down.
public final class WebhookDispatcher: Sendable {
    let apps: [String: AppPolicy]
    let ledger: any NotificationLedger & Ledger
    let client: UpstreamHTTPClient
    let environment: [String: String]
    let logger: Logger
    let now: @Sendable () -> Int64
    /// The longest one delivery attempt can take (connect + request timeouts of `client`).
    let attemptTimeoutMillis: Int64

    public init(apps: [String: AppPolicy], ledger: any NotificationLedger & Ledger, client: UpstreamHTTPClient,
                environment: [String: String], logger: Logger, attemptTimeoutMillis: Int64 = 20_000,
                now: @escaping @Sendable () -> Int64) {
        self.attemptTimeoutMillis = attemptTimeoutMillis
        self.apps = apps
        self.ledger = ledger
        self.client = client
        self.environment = environment
        self.logger = logger
        self.now = now
    }

    /// The wait before the next attempt: 1 s, 2 s, 4 s, … capped at one hour.
    static func backoffMs(afterAttempts attempts: Int) -> Int64 {
        backoff.delay(beforeRetry: attempts + 1).wholeMilliseconds
    }

    static let backoff = ExponentialBackoff(base: .seconds(1), cap: .seconds(3600))

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
        if let account { o["account"] = .string(account) }
        return JSONValue.object(o).jsonText
    }

    public static func signature(secret: String, timestamp: String, body: String) -> String {
        "sha256=" + HMACSHA256.hex(key: Array(secret.utf8), message: Array("\(timestamp).\(body)".utf8))
    }

    /// Sends what is due; returns how many were delivered.
    @discardableResult
    public func deliverDue(limit: Int = 16) async throws(VerificationError) -> Int {
        var delivered = 0
        // A batch taken for delivery stays ours longer than its receivers can take at the upstream
        // timeout, so another instance never sends the same event while we still may.
        let lease = Int64(max(1, limit)) * (attemptTimeoutMillis + 1_000)
        let leasedAt = now()
        for entry in try await ledger.leaseDueWebhooks(now: leasedAt, limit: limit, leaseMillis: lease) {
            guard let app = apps[entry.event.bundleId], let webhook = app.webhook else {
                // No receiver configured: nothing will ever take it, so it is not retried forever.
                try await ledger.markDelivered(entry.seq, at: now())
                continue
            }
            var account: String?
            if let chain = entry.event.originalTransactionId {
                account = try await ledger.owner(bundleId: entry.event.bundleId, originalTransactionId: chain)
            }
            let body = Self.body(entry.event, account: account, policy: app.gracePeriodPolicy)
            let timestamp = String(now() / 1000)
            let secret: String
            do {
                secret = try webhook.secret.resolve(environment: environment)
            } catch {
                // A configuration problem, not the receiver's: say which, and try again later.
                logger.error("webhook_secret_unavailable", ["bundleId": entry.event.bundleId, "code": error.code.rawValue])
                try await ledger.markFailed(entry.seq, nextAttemptAt: now() + Self.backoffMs(afterAttempts: entry.attempts))
                continue
            }
            // The slack is not a bound: a stalled storage checkout can outlast it. An attempt that might
            // end after the lease is not started; the rest of the batch is due again when the lease ends.
            guard now() + attemptTimeoutMillis <= leasedAt + lease else {
                logger.warning("webhook_lease_ran_out", ["bundleId": entry.event.bundleId])
                break
            }
            let ok: Bool
            do {
                let response = try await client.send(UpstreamRequest(method: "POST", url: webhook.url, headers: [
                    ("Content-Type", "application/json"), ("Idempotency-Key", entry.event.idempotencyKey),
                    ("X-IAPGW-Timestamp", timestamp),
                    ("X-IAPGW-Signature", Self.signature(secret: secret, timestamp: timestamp, body: body)),
                ], body: Array(body.utf8)))
                ok = (200..<300).contains(response.status)
            } catch {
                ok = false
            }
            if ok {
                try await ledger.markDelivered(entry.seq, at: now())
                delivered += 1
            } else {
                let next = now() + Self.backoffMs(afterAttempts: entry.attempts)
                try await ledger.markFailed(entry.seq, nextAttemptAt: next)
                logger.warning("webhook_failed", ["bundleId": entry.event.bundleId, "attempts": String(entry.attempts + 1)])
            }
        }
        return delivered
    }

    public func run(interval: Duration = .milliseconds(250)) async {
        while !Task.isCancelled {
            do {
                while try await deliverDue() > 0 {}
            } catch {
                logger.error("webhook_dispatch_failed", ["code": error.code.rawValue])
            }
            try? await Task.sleep(for: interval)
        }
    }
}
