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
    /// nil: notifications are not enabled (the route answers 404).
    let decoder: NotificationDecoder?
    /// Asked about the receipt a V1 notification carries; nil: V1 notifications are refused.
    let legacy: (any ReceiptReverifying)?
    let ledger: any NotificationLedger
    let metrics: GatewayMetrics
    let logger: Logger
    let now: @Sendable () -> Int64

    func answer(_ request: HTTPRequest, app: AppPolicy) async throws(VerificationError) -> HTTPResponse {
        let log = logger
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
        return .json(200, Self.answer.encode((fresh ? "accepted" : "duplicate", decoded.id)).jsonText)
    }

    /// Stored durably now (accepted) or before (duplicate), under its id.
    static let answer = JSONShape<(status: String, notificationId: String)>.object([
        .required("status", .oneOf(["accepted", "duplicate"])) { $0.status },
        .required("notificationId", .string) { $0.notificationId },
    ]).named("NotificationAccepted")
}

extension NotificationsEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route("POST", "/v1/notifications/{bundleId}", name: "notifications", body: "Notification", callsApple: true, answer: answer,
              summary: "App Store Server Notifications (V2 signedPayload, or V1 with the shared secret); 200 once stored durably, a genuine notification of a type or shape not acted on yet included (forwarded to the webhook as an event of its own). Apple does not retry a 4xx: it answers only what is forged, foreign or malformed (README, Notification answers)",
              refusals: [
                  "401": .error("V1 notification without the shared secret", headers: ["WWW-Authenticate"]),
                  "404": .error("notifications not enabled (NOT_FOUND)"),
                  "422": .error("nothing was stored"),
                  "503": .error("Apple is asked for V1 notifications only; Apple retries"),
              ],
              handler: .signed { endpoints, request, app throws(VerificationError) in
                  try await endpoints.notifications.answer(request, app: app)
              }),
    ]
}
