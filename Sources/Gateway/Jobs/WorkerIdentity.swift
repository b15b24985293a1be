import Foundation
import IAPCore

/// Who takes the leases of the background work (the webhook outbox, the finish outbox). A stable
/// identity names this instance again after a restart, and no other live instance has it: what it
/// holds at start was held by its previous incarnation, which no longer works on it, so it is taken
/// back at once instead of waiting out the lease. An ephemeral one is new at every start (nothing
/// to take back). Only the gateway names a stable one, so outside it there is just `ephemeral()`.
public struct WorkerIdentity: Sendable, Equatable {
    public var id: String
    public var isStable: Bool

    public static func ephemeral() -> WorkerIdentity { WorkerIdentity(id: "gw-" + UUID().uuidString, isStable: false) }
}

extension WorkerIdentity {
    /// At start, under a stable identity: what its previous incarnation held of one kind of work
    /// (`release` makes a holder's rows due now and counts them) is due at once. Logged as
    /// `<kind>_leases_reclaimed`; a failure is not fatal, those rows are due again once their lease
    /// runs out.
    func reclaimEarlierLeases(of kind: String, logger: Logger,
                              release: (String) async throws(VerificationError) -> Int) async {
        guard isStable else { return }
        do {
            let released = try await release(id)
            if released > 0 { logger.info("\(kind)_leases_reclaimed", ["rows": String(released)]) }
        } catch {
            logger.warning("\(kind)_lease_reclaim_failed", ["code": error.code.rawValue])
        }
    }
}
