import Foundation
import IAPCore
import UpstreamHTTP

/// App Store Server Notifications V2: `{"signedPayload": JWS}` whose payload is Apple's
/// ResponseBodyV2DecodedPayload, signed by the simulator's chain, POSTed to a loopback URL.
extension AppStoreSimulator {
    /// Builds, records and (when `url` is given) POSTs a notification about `purchase`'s transaction.
    /// Returns the signedPayload. A failed POST is recorded as a failed send attempt, not thrown.
    @discardableResult
    public func sendNotification(type: String, subtype: String? = nil, purchase: SimulatedPurchase,
                                 to url: String?) async throws -> String {
        guard let t = store.transaction(purchase.transactionId), let app = store.app(t.bundleId) else {
            throw SimulatorError("no transaction \(purchase.transactionId)")
        }
        let now = store.nowMs
        var data: [String: JSONValue] = [
            "appAppleId": .int(app.appAppleId), "bundleId": .string(app.bundleId),
            "bundleVersion": .string(app.bundleVersion), "environment": .string(t.environment.rawValue),
            "signedTransactionInfo": .string(try sign(t)),
        ]
        if let c = store.chain(t.originalTransactionId), let latest = store.transaction(c.latestTransactionId) {
            data["signedRenewalInfo"] = .string(try pki.signJWS(SignedPayloads.renewalInfo(c, latest: latest, signedDate: now)))
            data["status"] = .int(SignedPayloads.status(c, latest: latest, now: now))
        }
        return try await deliver(type: type, subtype: subtype, data: data, app: app, environment: t.environment,
                                 transaction: t, url: url)
    }

    /// A notification about the app rather than a purchase, returned signed (and POSTed when `url`
    /// is given). `RESCIND_CONSENT` carries `appData` with the signed app transaction of `owner`'s
    /// download, as Apple sends it; any other type (one Apple adds later) carries `data` naming only
    /// the app, so the gateway meets a genuine notification it does not understand yet.
    @discardableResult
    public func sendAppNotification(type: String, subtype: String? = nil, bundleId: String, owner: String,
                                    environment: AppStoreEnvironment = .production, to url: String?) async throws -> String {
        guard let app = store.app(bundleId) else { throw SimulatorError("unknown app \(bundleId)") }
        let now = store.nowMs
        var container: [String: JSONValue] = [
            "appAppleId": .int(app.appAppleId), "bundleId": .string(app.bundleId), "environment": .string(environment.rawValue),
        ]
        var payload: [String: JSONValue] = [
            "notificationType": .string(type), "notificationUUID": .string(UUID().uuidString.lowercased()),
            "version": .string("2.0"), "signedDate": .int(now),
        ]
        payload["subtype"] = subtype.map(JSONValue.string)
        if type == "RESCIND_CONSENT" {
            container["signedAppTransactionInfo"] = .string(try signedAppTransaction(owner: owner, bundleId: bundleId,
                                                                                   environment: environment))
            payload["appData"] = .object(container)
        } else {
            container["bundleVersion"] = .string(app.bundleVersion)
            payload["data"] = .object(container)
        }
        let signed = try pki.signJWS(.object(payload))
        var result = "NO_RESPONSE"
        if let url { result = await Self.post(signed, to: url) }
        store.record(notification: NotificationRecord(
            bundleId: app.bundleId, environment: environment, notificationType: type, subtype: subtype, transactionId: nil,
            originalTransactionId: nil, signedPayload: signed, signedDate: now, sendAttemptResult: result))
        return signed
    }

    /// `TEST` notification for `POST /inApps/v1/notifications/test`; returns the test token.
    func sendTestNotification(app: SimulatedApp, environment: AppStoreEnvironment) async throws -> String {
        let data: [String: JSONValue] = [
            "appAppleId": .int(app.appAppleId), "bundleId": .string(app.bundleId),
            "bundleVersion": .string(app.bundleVersion), "environment": .string(environment.rawValue),
        ]
        let url = app.notificationURL
        let token = UUID().uuidString.lowercased() + "_" + String(store.nowMs)
        let payload = try buildPayload(type: "TEST", subtype: nil, data: data)
        store.record(notification: NotificationRecord(
            bundleId: app.bundleId, environment: environment, notificationType: "TEST", subtype: nil, transactionId: nil,
            originalTransactionId: nil, signedPayload: payload, signedDate: store.nowMs,
            sendAttemptResult: url == nil ? "NO_RESPONSE" : "SUCCESS"))
        if let url { Task { _ = await Self.post(payload, to: url) } }
        return token
    }

    private func buildPayload(type: String, subtype: String?, data: [String: JSONValue]) throws -> String {
        var payload: [String: JSONValue] = [
            "notificationType": .string(type), "notificationUUID": .string(UUID().uuidString.lowercased()),
            "version": .string("2.0"), "signedDate": .int(store.nowMs), "data": .object(data),
        ]
        payload["subtype"] = subtype.map(JSONValue.string)
        return try pki.signJWS(.object(payload))
    }

    private func deliver(type: String, subtype: String?, data: [String: JSONValue], app: SimulatedApp,
                         environment: AppStoreEnvironment, transaction: TransactionRecord, url: String?) async throws -> String {
        let payload = try buildPayload(type: type, subtype: subtype, data: data)
        var result = "NO_RESPONSE"
        if let url { result = await Self.post(payload, to: url) }
        store.record(notification: NotificationRecord(
            bundleId: app.bundleId, environment: environment, notificationType: type, subtype: subtype,
            transactionId: transaction.transactionId, originalTransactionId: transaction.originalTransactionId,
            signedPayload: payload, signedDate: store.nowMs, sendAttemptResult: result))
        return payload
    }

    /// Apple's sendAttemptResult vocabulary for what the receiver did.
    static func post(_ signedPayload: String, to url: String) async -> String {
        guard let client = try? UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(requestTimeout: .seconds(10))) else {
            return "OTHER"
        }
        let body = JSONValue.object(["signedPayload": .string(signedPayload)]).jsonText
        do {
            // UpstreamHTTP refuses plain http to anything but loopback, which is the rule here too.
            let response = try await client.send(UpstreamRequest(method: "POST", url: url,
                                                                 headers: [("Content-Type", "application/json")],
                                                                 body: Array(body.utf8)))
            return (200..<300).contains(response.status) ? "SUCCESS" : "UNSUCCESSFUL_HTTP_RESPONSE_CODE"
        } catch .timedOut {
            return "TIMED_OUT"
        } catch .insecureScheme {
            return "UNSUPPORTED_HTTP_VERSION"
        } catch {
            return "OTHER"
        }
    }
}
