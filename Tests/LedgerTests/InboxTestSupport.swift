import Foundation
@testable import IAPCore
import XCTest
@testable import Ledger

/// Inbox entries and a stand-in for the lifecycle state machine: it only needs to be predictable.
class InboxTestCase: LedgerTestCase {
    let app = "com.example.app"
    let day: Int64 = 86_400_000
    let t0: Int64 = 1_700_000_000_000

    func entry(_ id: String, signedDate: Int64, receivedAt: Int64? = nil, chain: String? = "1000",
               type: String = "DID_RENEW", bundleId: String? = nil, body: String? = nil) -> InboxEntry {
        let bundle = bundleId ?? app
        let event = chain.map { chain in
            LifecycleEvent(id: id, bundleId: bundle, notificationType: NotificationType(rawValue: type), subtype: nil,
                           signedDate: signedDate, environment: .sandbox,
                           transaction: transaction("t-\(id)", original: chain), renewal: nil)
        }
        return InboxEntry(id: id, bundleId: bundle, version: "2", notificationType: type, subtype: nil,
                          signedDate: signedDate, environment: "Sandbox", receivedAt: receivedAt ?? signedDate + 5,
                          rawBody: Data((body ?? #"{"signedPayload":"\#(id)"}"#).utf8), event: event)
    }

    /// The state the fake machine moves a chain to: active until 30 days after the notification,
    /// except REVOKE; an unknown type changes nothing.
    func fakeOutcome(_ entry: InboxEntry, _ stored: SubscriptionState?) -> LifecycleOutcome {
        guard NotificationType(rawValue: entry.notificationType).isKnown else {
            return LifecycleOutcome(newState: nil, unknownType: true)
        }
        guard let event = entry.event, let chain = event.originalTransactionId else { return LifecycleOutcome(newState: nil) }
        var state = stored ?? SubscriptionState(bundleId: entry.bundleId, originalTransactionId: chain,
                                                productId: "com.example.pro", state: .active,
                                                environment: event.environment, lastSignedDate: 0, source: "notification")
        state.state = entry.notificationType == "REVOKE" ? .revoked : .active
        state.expiresDate = entry.signedDate + 30 * day
        state.lastSignedDate = entry.signedDate
        state.lastTransactionId = event.transaction?.transactionId
        return LifecycleOutcome(newState: state, webhooks: [webhook(for: entry, chain: chain, state: state.state)])
    }

    func webhook(for entry: InboxEntry, chain: String?, state: Entitlement.State? = .active,
                 kind: WebhookEvent.Kind = .entitlementChanged, bundleId: String? = nil) -> WebhookEvent {
        WebhookEvent(kind: kind, idempotencyKey: "\(entry.id):\(chain ?? "-")", bundleId: bundleId ?? entry.bundleId,
                     originalTransactionId: chain, transactionId: entry.event?.transaction?.transactionId,
                     productId: "com.example.pro", state: state, expiresDate: entry.signedDate + 30 * day,
                     notificationType: entry.notificationType, subtype: entry.subtype, occurredAt: entry.signedDate)
    }

    /// Drains with the fake machine, recording the ids applied in order.
    @discardableResult
    func drain(_ ledger: SQLLedger, now: Int64? = nil, limit: Int = 100, applied: inout [String])
        throws -> ProcessReport {
        try ledger.processPending(limit: limit, now: now ?? t0 + day) { (entry, stored) throws(VerificationError) in
            applied.append(entry.id)
            return fakeOutcome(entry, stored)
        }
    }

    @discardableResult
    func drain(_ ledger: SQLLedger, now: Int64? = nil, limit: Int = 100) throws -> ProcessReport {
        var ignored: [String] = []
        return try drain(ledger, now: now, limit: limit, applied: &ignored)
    }

    func count(_ ledger: SQLLedger, _ sql: String) throws -> Int64 {
        try ledger.database.withConnection { (connection) throws(VerificationError) in
            try connection.query(sql) { (row) throws(VerificationError) in try row.requiredInteger(0) }.first ?? -1
        }
    }
}
