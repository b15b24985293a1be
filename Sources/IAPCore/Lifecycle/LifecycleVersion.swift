/// The position of one event in the order the state machine joins events by.
///
/// Notifications arrive at least once and in any order, so the state is not "the last event
/// applied" but "the greatest event seen": each register of `SubscriptionState` keeps the fields
/// of the event with the greatest version, and a smaller or equal version changes nothing. A max
/// over a total order is commutative, associative and idempotent, so any delivery order of the
/// same set of events ends in the same state.
///
/// Order, most significant first:
/// 1. `decisive`: an event that states the entitlement (a renewal, an expiry, a refund…) beats one
///    that only mentions the transaction (a renewal-status change, a price-increase notice…). An
///    informational event only fills in a chain nothing decisive has been seen for.
/// 2. `purchaseDate` of the transaction the event is about: a newer period beats anything said
///    about an older one (a late DID_RENEW, EXPIRED or REFUND of a superseded period is stale).
/// 3. `signedDate`: for the same period, what Apple said last wins (renewed → failed to renew →
///    expired; refunded → refund reversed).
/// 4. `eventId`: only to make ties deterministic; equal ids are the same event (a duplicate).
public struct LifecycleVersion: Codable, Hashable, Sendable, Comparable {
    public var decisive: Bool
    public var purchaseDate: Int64
    public var signedDate: Int64
    public var eventId: String

    public static func < (lhs: Self, rhs: Self) -> Bool {
        if lhs.decisive != rhs.decisive { return !lhs.decisive }
        if lhs.purchaseDate != rhs.purchaseDate { return lhs.purchaseDate < rhs.purchaseDate }
        if lhs.signedDate != rhs.signedDate { return lhs.signedDate < rhs.signedDate }
        return lhs.eventId < rhs.eventId
    }
}
