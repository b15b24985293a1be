import Adapters
import Foundation
import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// POST /v1/notifications/{bundleId}: public (Apple calls it), so trust comes from signatures
/// only. Answers 200 only once the notification is durably in the inbox; a duplicate delivery
/// answers 200 and changes nothing. Processing happens later, off the request (`NotificationProcessor`).
struct NotificationsEndpoint: Sendable {
    let apps: [String: AppPolicy]
    /// nil: notifications are not enabled (the route answers 404).
    let decoder: NotificationDecoder?
    /// Asked about the receipt a V1 notification carries; nil: V1 notifications are refused.
    let legacy: (any ReceiptReverifying)?
    let ledger: any NotificationLedger
    let metrics: GatewayMetrics
    let logger: Logger
    let now: @Sendable () -> Int64

    func answer(_ request: HTTPRequest, bundleId: String) async throws(VerificationError) -> HTTPResponse {
        let log = logger
        guard let app = apps[bundleId] else { throw VerificationError.unknownApp(bundleId) }
        guard let decoder else { throw VerificationError(.notFound, "notifications are not enabled") }
        var decoded: DecodedNotification
        do throws(VerificationError) {
            decoded = try await decoder.decodeCheckingOnline(body: request.body, app: app)
            if let receipt = decoded.v1LatestReceipt {
                // A V1 body is a trigger only: Apple's answer about its receipt is what gets applied.
                guard let legacy else {
                    throw VerificationError(.invalidConfiguration, "V1 notifications need an adapter that re-verifies receipts")
                }
                // Apple's claim, not an account's: the receipt of a sandbox account's purchase names no account.
                let outcome = try await legacy.reverify(receipt: receipt, for: app, policy: ClaimPolicy(app: app, claimant: .apple))
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
}
