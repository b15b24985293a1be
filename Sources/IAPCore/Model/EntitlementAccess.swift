/// The one owner of "what state is a purchase in now, and does it grant access". Every answer that
/// states access asks here, with the stored facts and the current time: the verify answer and
/// `GET …/entitlements`, the webhook payloads, the subscription lifecycle, the migration comparator
/// (and so the dashboard), and the sweep that announces access ended by time alone. Whether a state
/// grants access under an app's grace-period policy is `grantsAccess`, in IAPConfig beside that policy.
///
/// A stored state is what Apple's facts said when they arrived; the clock only ever moves it toward
/// less: `active` ends as `expired` at its `expiresDate`, `gracePeriod` ends as `billingRetry` at
/// its `gracePeriodExpiresDate`. Billing retry, expiry, refund and revocation have no end date of
/// their own: only Apple's word (a notification, a reconciled status, a fresh verify) changes them.
public enum EntitlementAccess {
    /// How long before a period's stated end access is already judged over. It errs toward ending
    /// access (fail closed), by a bounded amount: the end dates are Apple's clock, ours may run a
    /// little behind it, and access must not outlast what Apple sold. The cost is at most this much
    /// of a paid period, which Apple's renewals (charged ahead of the expiry) make moot. 2 s is far
    /// above NTP-synchronised drift and far below anything a subscriber would notice.
    public static let clockSkewAllowanceMillis: Int64 = 2_000

    /// `notificationType` of the webhook events the clock makes (not an Apple type).
    public static let periodEndedNotificationType = "GATEWAY_PERIOD_ENDED"

    /// The state at `now` of an entitlement stored as `recorded`, whose period ends at `periodEnd`
    /// (the subscription's `expiresDate`; in `gracePeriod` the grace period's end; nil: no end date).
    public static func state(recorded: Entitlement.State, periodEnd: Int64?, now: Int64) -> Entitlement.State {
        guard let periodEnd, ended(periodEnd, now: now) else { return recorded }
        switch recorded {
        case .active: return .expired
        case .gracePeriod: return .billingRetry
        case .billingRetry, .expired, .revoked, .refunded, .credited: return recorded
        }
    }

    /// The state at `now` of the chain whose current transaction is `t`, with its renewal info.
    public static func state(of t: CanonicalTransaction, renewal: CanonicalRenewal?, now: Int64) -> Entitlement.State {
        if t.revocationDate != nil {
            // Family Sharing ending is a revocation, not a refund.
            return t.inAppOwnershipType == .familyShared ? .revoked : .refunded
        }
        // Used up once credited: an end date, if any, has nothing to end.
        if t.type == .consumable { return .credited }
        guard let expires = t.expiresDate else {
            // Only subscriptions end by date; an auto-renewable without an end date is malformed:
            // not entitled (never "active forever").
            return t.type == .autoRenewable ? .expired : .active
        }
        let paid = state(recorded: .active, periodEnd: expires, now: now)
        guard paid == .expired, let renewal else { return paid }
        // The paid period is over: Apple may still be retrying the renewal, first in grace.
        if let graceEnd = renewal.gracePeriodExpiresDate,
           state(recorded: .gracePeriod, periodEnd: graceEnd, now: now) == .gracePeriod { return .gracePeriod }
        return renewal.isInBillingRetryPeriod == true ? .billingRetry : .expired
    }

    /// The date that ends `state` for a transaction (the grace period's end while in grace).
    public static func periodEnd(of t: CanonicalTransaction, renewal: CanonicalRenewal?,
                                 in state: Entitlement.State) -> Int64? {
        state == .gracePeriod ? renewal?.gracePeriodExpiresDate : t.expiresDate
    }

    /// A stored entitlement as it stands at `now` (its `expiresDate` is its period's end).
    public static func current(_ e: Entitlement, now: Int64) -> Entitlement {
        var e = e
        e.state = state(recorded: e.state, periodEnd: e.expiresDate, now: now)
        return e
    }

    /// A lifecycle state as it stands at `now`.
    public static func current(_ s: SubscriptionState, now: Int64) -> SubscriptionState {
        var s = s
        s.state = state(recorded: s.state, periodEnd: s.periodEnd, now: now)
        return s
    }

    /// The `entitlementChanged` event for a state the clock alone moved, or nil if `now` moves
    /// nothing. Its key names the chain and the transition (the state left and the date that ended
    /// it), so the sweep on any instance and the lifecycle make the same event: the outbox keeps one.
    public static func periodEnded(bundleId: String, originalTransactionId: String, productId: String,
                                   recorded: Entitlement.State, periodEnd: Int64?, now: Int64) -> WebhookEvent? {
        let next = state(recorded: recorded, periodEnd: periodEnd, now: now)
        guard next != recorded, let periodEnd else { return nil }
        let kind = WebhookEvent.Kind.entitlementChanged
        return WebhookEvent(kind: kind,
                            idempotencyKey: LifecycleWebhooks.idempotencyKey(
                                eventId: "clock:\(recorded.rawValue):\(periodEnd)",
                                originalTransactionId: originalTransactionId, kind: kind),
                            bundleId: bundleId, originalTransactionId: originalTransactionId, transactionId: nil,
                            productId: productId, state: next, expiresDate: periodEnd,
                            notificationType: periodEndedNotificationType, subtype: nil, occurredAt: periodEnd)
    }

    /// Whether a period that ends at `periodEnd` is over at `now` (`clockSkewAllowanceMillis`
    /// early): every reader that asks "is this date past" for access asks here.
    public static func ended(_ periodEnd: Int64, now: Int64) -> Bool {
        let (end, overflow) = periodEnd.subtractingReportingOverflow(clockSkewAllowanceMillis)
        return overflow || now >= end
    }
}

extension SubscriptionState {
    /// The date that ends the current state: the grace period's end while in grace, else `expiresDate`.
    public var periodEnd: Int64? { state == .gracePeriod ? (gracePeriodExpiresDate ?? expiresDate) : expiresDate }
}
