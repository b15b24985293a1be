import Foundation
import IAPCore
import UpstreamHTTP

/// The Retention Messaging API's realtime requests: what the App Store sends the developer's
/// realtime URL while a subscriber views their subscription (Apple's DecodedRealtimeRequestBody,
/// signed by the simulator's chain like its notifications).
extension AppStoreSimulator {
    /// The `signedPayload` of a realtime request about the subscription `originalTransactionId`
    /// (its product now), as a customer with `userLocale` would cause it; signed now, or at
    /// `signedDate` (ms: a request captured then and replayed now).
    public func signedRealtimeRequest(originalTransactionId: String, userLocale: String = "en-US",
                                      requestIdentifier: UUID = UUID(), signedDate: Int64? = nil) throws -> String {
        guard let chain = store.chain(originalTransactionId), let latest = store.transaction(chain.latestTransactionId),
              let app = store.app(chain.bundleId) else {
            throw SimulatorError("no subscription \(originalTransactionId)")
        }
        return try pki.signJWS(.object([
            "originalTransactionId": .string(originalTransactionId), "appAppleId": .int(app.appAppleId),
            "productId": .string(latest.productId), "userLocale": .string(userLocale),
            "requestIdentifier": .string(requestIdentifier.uuidString), "signedDate": .int(signedDate ?? store.nowMs),
            "environment": .string(chain.environment.rawValue),
        ]))
    }

    /// Posts a realtime request to `url` (loopback) and answers what came back.
    public func sendRealtimeRequest(originalTransactionId: String, userLocale: String = "en-US", to url: String,
                                    client: UpstreamHTTPClient) async throws -> UpstreamResponse {
        let payload = try signedRealtimeRequest(originalTransactionId: originalTransactionId, userLocale: userLocale)
        let body = JSONValue.object(["signedPayload": .string(payload)]).jsonText
        return try await client.send(UpstreamRequest(method: "POST", url: url, headers: [("Content-Type", "application/json")],
                                                     body: Array(body.utf8)))
    }
}
