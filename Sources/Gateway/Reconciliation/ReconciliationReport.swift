import IAPCore

/// What one reconciliation pass did, summed over every app. Failures are counted by app and
/// error code (never messages: they could name what the logs must not).
public struct ReconciliationReport: Sendable, Equatable {
    /// Notifications read back with Get Notification History.
    public var historyRead = 0
    /// Of those, the ones the inbox did not have yet (gaps filled).
    public var historyEnqueued = 0
    /// History payloads that failed verification (counted, skipped).
    public var historyRefused = 0
    /// Chains re-read with Get All Subscription Statuses.
    public var statusChainsRead = 0
    /// Reconciled status events new to the inbox.
    public var statusEventsEnqueued = 0
    /// Stored legacy receipts re-verified through verifyReceipt.
    public var receiptsReverified = 0
    public var receiptEventsEnqueued = 0
    /// Consumption requests answered through Send Consumption Information.
    public var consumptionAnswered = 0
    /// "bundleId:step:CODE" for each step that failed.
    public var failures: [String] = []

    public init() {}

    public var json: JSONValue {
        .object([
            "historyRead": .int(Int64(historyRead)), "historyEnqueued": .int(Int64(historyEnqueued)),
            "historyRefused": .int(Int64(historyRefused)), "statusChainsRead": .int(Int64(statusChainsRead)),
            "statusEventsEnqueued": .int(Int64(statusEventsEnqueued)),
            "receiptsReverified": .int(Int64(receiptsReverified)),
            "receiptEventsEnqueued": .int(Int64(receiptEventsEnqueued)),
            "consumptionAnswered": .int(Int64(consumptionAnswered)),
            "failures": .array(failures.map(JSONValue.string)),
        ])
    }

    mutating func fail(_ bundleId: String, _ step: String, _ error: VerificationError) {
        failures.append("\(bundleId):\(step):\(error.code.rawValue)")
    }
}
