import Foundation
import IAPCore
import Synchronization

/// The rows of one leased batch a worker still holds, and until when (as last renewed). While the
/// worker is on the batch, `keepRenewing` renews the rows every third of a lease; a row a renewal
/// no longer finds the worker's (taken by another holder after a stall, marked meanwhile) is
/// dropped from the batch and not worked on any more.
final class LeasedBatch<Key: Hashable & Sendable>: Sendable {
    private struct State: Sendable {
        var held: Set<Key>
        var until: Int64
    }

    private let state: Mutex<State>

    init(_ keys: [Key], until: Int64) { state = Mutex(State(held: Set(keys), until: until)) }

    var held: [Key] { state.withLock { Array($0.held) } }
    var until: Int64 { state.withLock { $0.until } }

    /// Still ours, with at least `margin` ms of the lease left.
    func holds(_ key: Key, now: Int64, margin: Int64) -> Bool {
        state.withLock { $0.held.contains(key) && now + margin < $0.until }
    }

    /// `held`: what the renewal found still ours; the rest is not worked on any more.
    func renewed(_ held: Set<Key>, until: Int64) {
        state.withLock { state in
            state.held.formIntersection(held)
            state.until = until
        }
    }

    /// Renews the batch every third of `leaseMillis` until cancelled (the batch is done). A renewal
    /// that fails is logged; the lease as last renewed then runs out on its own.
    func keepRenewing(leaseMillis: Int64, now: @Sendable () -> Int64, wait: @Sendable (Duration) async throws -> Void,
                      logger: Logger, failure: String,
                      renew: @Sendable ([Key], Int64) async throws(VerificationError) -> Set<Key>) async {
        while !Task.isCancelled {
            do { try await wait(.milliseconds(max(leaseMillis / 3, 1))) } catch { return }
            let until = now() + leaseMillis
            do {
                renewed(try await renew(held, until), until: until)
            } catch {
                logger.warning(failure, ["code": error.code.rawValue])
            }
        }
    }
}
