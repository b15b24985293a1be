import Foundation
import IAPConfig
import IAPCore
import Ledger

/// Announces access that ends by time alone: a subscription past its expiry, a grace period past
/// its end, with no notification to say so. Every `background.entitlementSweepSeconds` (default 30,
/// 1…60; `IAPGW_ENTITLEMENT_SWEEP_SECONDS` overrides it) it moves the stored entitlements the clock has ended and queues their
/// `entitlement.changed` webhooks through the outbox, so an end is announced at most one interval
/// late. Reads never wait for it: every answer judges the clock itself.
public struct EntitlementSweep: Sendable {
    /// Rows per ledger call, and calls per pass: a backlog (a gateway that was down) is worked off
    /// over several passes instead of holding the storage for one long one.
    static let batchSize = 200
    static let maxBatchesPerPass = 50

    let ledger: any NotificationLedger
    let intervalSeconds: Int64
    let logger: Logger
    let now: @Sendable () -> Int64

    public init(ledger: any NotificationLedger, settings: GatewayConfig.Background, logger: Logger,
                now: @escaping @Sendable () -> Int64) {
        self.ledger = ledger
        intervalSeconds = settings.entitlementSweepSeconds
        self.logger = logger
        self.now = now
    }

    /// One bounded pass; returns how many entitlements the clock ended.
    @discardableResult
    public func sweep() async throws(VerificationError) -> Int {
        var moved = 0
        for _ in 0..<Self.maxBatchesPerPass {
            let batch = try await ledger.advanceEntitlementsByClock(now: now(), limit: Self.batchSize)
            moved += batch
            if batch < Self.batchSize { break }
        }
        return moved
    }

    /// Sweeps at start (a restarted gateway catches up at once), then every interval, until cancelled.
    public func run() async {
        await repeatUntilCancelled(every: .seconds(intervalSeconds), logger: logger,
                                   failure: "entitlement_sweep_failed") { () throws(VerificationError) in
            let moved = try await sweep()
            if moved > 0 { logger.info("entitlements_ended_by_time", ["count": String(moved)]) }
        }
    }
}
