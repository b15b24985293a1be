import Synchronization

/// At most `limit` deliveries to one receiver in flight at once, across every batch a dispatcher
/// works on; a delivery waiting for a slot gets the next one freed, first come first served.
final class ReceiverSlots: Sendable {
    private struct State: Sendable {
        var inUse: [String: Int] = [:]
        var waiting: [String: [CheckedContinuation<Void, Never>]] = [:]
    }

    let limit: Int
    private let state = Mutex(State())

    init(limit: Int) { self.limit = max(limit, 1) }

    func acquire(_ receiver: String) async {
        await withCheckedContinuation { (slot: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state -> Bool in
                guard state.inUse[receiver, default: 0] < limit else {
                    state.waiting[receiver, default: []].append(slot)
                    return false
                }
                state.inUse[receiver, default: 0] += 1
                return true
            }
            if granted { slot.resume() }
        }
    }

    /// Hands the slot to the delivery waiting longest, or frees it.
    func release(_ receiver: String) {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if let first = state.waiting[receiver]?.first {
                state.waiting[receiver]?.removeFirst()
                return first
            }
            state.inUse[receiver, default: 1] -= 1
            return nil
        }
        next?.resume()
    }
}
