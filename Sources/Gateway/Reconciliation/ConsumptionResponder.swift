import Adapters
import Foundation
import IAPConfig
import IAPCore
import Ledger

/// Answers Apple's CONSUMPTION_REQUEST through Send Consumption Information, for apps whose policy
/// has `consumptionResponse`, within Apple's 12-hour window. Only what the policy declares is sent;
/// every fact about the customer the gateway cannot know goes as 0 ("undeclared"). An answer that
/// fails stays pending and is tried again on the next pass; one past the window is never sent.
public final class ConsumptionResponder: Sendable {
    /// Apple waits 12 hours for the answer.
    public static let windowMillis: Int64 = 12 * 3_600_000

    let apps: [String: AppPolicy]
    let ledger: any NotificationLedger
    let serverAPI: (any ReconciliationSource)?
    let logger: Logger
    let now: @Sendable () -> Int64

    public init(apps: [String: AppPolicy], ledger: any NotificationLedger, serverAPI: (any ReconciliationSource)?,
                logger: Logger = .disabled, now: @escaping @Sendable () -> Int64) {
        self.apps = apps
        self.ledger = ledger
        self.serverAPI = serverAPI
        self.logger = logger
        self.now = now
    }

    /// The ConsumptionRequest body the policy allows.
    public static func body(_ policy: AppPolicy.ConsumptionResponse) -> JSONValue {
        .object([
            "customerConsented": .bool(true), "consumptionStatus": .int(0), "platform": .int(policy.platform),
            "sampleContentProvided": .bool(policy.sampleContentProvided), "deliveryStatus": .int(policy.deliveryStatus),
            "appAccountToken": .string(""), "accountTenure": .int(0), "playTime": .int(0),
            "lifetimeDollarsRefunded": .int(0), "lifetimeDollarsPurchased": .int(0), "userStatus": .int(0),
            "refundPreference": .int(policy.refundPreference),
        ])
    }

    /// Answers what is pending and due; returns how many were answered. Failures are appended as
    /// "bundleId:consumption:CODE".
    public func answerPending(limit: Int = 200, failures: inout [String]) async -> Int {
        guard let serverAPI else { return 0 }
        let pending: [ConsumptionRequest]
        do { pending = try await ledger.pendingConsumptionRequests(notBefore: now() - Self.windowMillis, limit: limit) } catch {
            failures.append("*:consumption:\(error.code.rawValue)")
            return 0
        }
        var answered = 0
        for request in pending {
            guard let app = apps[request.bundleId], let policy = app.consumptionResponse else { continue }
            do throws(VerificationError) {
                let client = try serverAPI.client(for: app)
                try await client.sendConsumptionData(transactionId: request.transactionId, body: Self.body(policy),
                                                     environment: try await environment(of: request, app: app))
                if try await ledger.markConsumptionAnswered(bundleId: request.bundleId, transactionId: request.transactionId,
                                                      at: now()) {
                    answered += 1
                }
            } catch {
                failures.append("\(request.bundleId):consumption:\(error.code.rawValue)")
                logger.warning("consumption_answer_failed", ["bundleId": request.bundleId, "code": error.code.rawValue])
            }
        }
        return answered
    }

    private func environment(of request: ConsumptionRequest, app: AppPolicy) async throws(VerificationError) -> ServerAPIEnvironment {
        if let chain = request.originalTransactionId,
           let state = try await ledger.subscriptionState(bundleId: request.bundleId, originalTransactionId: chain) {
            return state.environment == .sandbox ? .sandbox : .production
        }
        return app.identity(for: .apple).primaryEnvironment == .production ? .production : .sandbox
    }
}
