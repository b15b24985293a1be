/// The subscription state machine: one verified notification (or reconciliation fact) in, the
/// chain's new state and the webhooks to send out. Pure: no clock but `now`, no I/O, no throwing.
///
/// Ordering rule (see `LifecycleVersion`): the state is a join, not a log. It has two registers,
/// each holding the fields of the greatest event seen for it:
/// - entitlement (productId, state, expiresDate, grace, revocation, last transaction): greatest
///   by (decisive, transaction purchaseDate, signedDate, event id);
/// - renewal preference (autoRenewStatus, autoRenewProductId): greatest by (signedDate, event id);
/// plus `lastSignedDate`, the max. Each register's value depends only on its winning event (and
/// `now`), so the final state is a function of the set of events: any permutation, and any number
/// of duplicates, gives the same state. A stale event (smaller version) changes nothing.
public enum SubscriptionLifecycle {
    /// Not an Apple type: the one reconciliation uses for a status read with Get All Subscription
    /// Statuses (transaction + renewal info, signedDate = when Apple signed them). Facts from Get
    /// Notification History keep their own notificationType. Not in `NotificationType.known`.
    public static let reconciledStatus = NotificationType(rawValue: "GATEWAY_RECONCILED_STATUS")

    /// Applies `event` to the chain it names. `current` must be that chain's state (same bundleId
    /// and originalTransactionId) or nil if none is stored; a state of another chain is left alone.
    ///
    /// No app policy goes in: the state records what Apple said (gracePeriod, billingRetry…), and
    /// whether that grants access is decided when entitlements are read (`EntitlementAccess`), so
    /// a policy change needs no replay.
    public static func apply(_ event: LifecycleEvent, to current: SubscriptionState?, now: Int64) -> LifecycleOutcome {
        let classification = LifecycleClassification.classify(event.notificationType, event.subtype)
        let chainId = event.originalTransactionId
        let webhooks = LifecycleWebhooks(event: event, chainId: chainId)

        let decisive: Bool
        let rule: LifecycleClassification.EntitlementRule
        switch classification.effect {
        case .unknown:
            return LifecycleOutcome(newState: nil, webhooks: [webhooks.notice(.unknownNotification)], unknownType: true)
        case .noChain:
            return LifecycleOutcome(newState: nil, webhooks: classification.notices.map { webhooks.notice($0) })
        case .informs:
            (decisive, rule) = (false, .transactionDates)
        case .decides(let decidedRule):
            (decisive, rule) = (true, decidedRule)
        }

        let notices = classification.notices.map { webhooks.notice($0) } + consumableRefund(event, webhooks)
        guard let chainId, current.map({ $0.bundleId == event.bundleId && $0.originalTransactionId == chainId }) ?? true
        else { return LifecycleOutcome(newState: nil, webhooks: notices) }

        var next = current
        // Whether the event competed for a register, and whether it won one: an event that
        // competed and won nothing is stale (kept for audit only).
        var competed = false, won = false
        if let transaction = event.transaction {
            competed = true
            let version = LifecycleVersion(decisive: decisive, purchaseDate: transaction.purchaseDate ?? .min,
                                           signedDate: event.signedDate, eventId: event.id)
            if current?.entitlementVersion.map({ version > $0 }) ?? true {
                won = true
                next = entitlementFields(of: event, transaction: transaction, chainId: chainId, rule: rule,
                                         version: version, onto: current, now: now)
            }
        }
        // Renewal info alone cannot found a chain: it names no product the chain entitles.
        guard var state = next else { return LifecycleOutcome(newState: nil, webhooks: notices) }

        if let renewal = event.renewal {
            competed = true
            let version = LifecycleVersion(decisive: false, purchaseDate: 0, signedDate: event.signedDate, eventId: event.id)
            if state.renewalVersion.map({ version > $0 }) ?? true {
                won = true
                state.autoRenewStatus = renewal.autoRenewStatus ?? autoRenewStatusImplied(by: event.subtype)
                state.autoRenewProductId = renewal.autoRenewProductId
                state.renewalVersion = version
            }
        }
        state.lastSignedDate = max(current?.lastSignedDate ?? .min, event.signedDate)

        var out: [WebhookEvent] = []
        // What the app was last told is the stored state as the clock has moved it since: an end
        // the clock made is announced once (the sweep's event, same key), never again by this event.
        let told = current.map { EntitlementAccess.current($0, now: now) }
        if let current, let ended = EntitlementAccess.periodEnded(
            bundleId: current.bundleId, originalTransactionId: current.originalTransactionId, productId: current.productId,
            recorded: current.state, periodEnd: current.periodEnd, now: now) {
            out.append(ended)
        }
        if entitlementChanged(from: told, to: EntitlementAccess.current(state, now: now)) {
            out.append(webhooks.entitlementChanged(state))
        }
        if renewalPreferenceChanged(from: current, to: state),
           [.didChangeRenewalPref, .didChangeRenewalStatus].contains(event.notificationType) {
            out.append(webhooks.notice(.renewalPreferenceChanged, state: state))
        }
        out += notices
        return LifecycleOutcome(newState: state != current ? state : nil, webhooks: out, stale: competed && !won)
    }

    /// The entitlement register as `event` alone states it; the renewal register and
    /// lastSignedDate are carried over from `current`.
    static func entitlementFields(of event: LifecycleEvent, transaction: CanonicalTransaction, chainId: String,
                                  rule: LifecycleClassification.EntitlementRule, version: LifecycleVersion,
                                  onto current: SubscriptionState?, now: Int64) -> SubscriptionState {
        let source = event.id.hasPrefix("reconcile:") ? "reconciliation" : "notification"
        var state = current ?? SubscriptionState(bundleId: event.bundleId, originalTransactionId: chainId,
                                                 productId: transaction.productId, state: .expired,
                                                 environment: event.environment, lastSignedDate: event.signedDate,
                                                 source: source)
        let (entitlement, graceEnd) = entitlementState(rule, transaction: transaction, renewal: event.renewal, now: now)
        state.productId = transaction.productId
        state.state = entitlement
        state.expiresDate = transaction.expiresDate
        state.commitmentExpiresDate = transaction.commitmentExpiresDate
        state.gracePeriodExpiresDate = graceEnd
        switch entitlement {
        case .refunded, .revoked:
            state.revocationDate = transaction.revocationDate ?? event.signedDate
            state.revocationReason = transaction.revocationReason
        default:
            state.revocationDate = nil
            state.revocationReason = nil
        }
        state.environment = event.environment
        state.lastTransactionId = transaction.transactionId
        state.lastPurchaseDate = transaction.purchaseDate
        state.source = source
        state.entitlementVersion = version
        return state
    }

    /// The state `rule` gives at `now`, and the grace period end worth keeping with it. Dates are
    /// judged by `EntitlementAccess`, as every reader judges them later.
    static func entitlementState(_ rule: LifecycleClassification.EntitlementRule, transaction: CanonicalTransaction,
                                 renewal: CanonicalRenewal?, now: Int64) -> (Entitlement.State, Int64?) {
        let graceEnd = renewal?.gracePeriodExpiresDate
        switch rule {
        case .transactionDates:
            return (EntitlementAccess.state(of: transaction, renewal: nil, now: now), nil)
        case .gracePeriod:
            // Apple said "grace"; without an end date (or past it) only billing retry is certain.
            guard graceEnd != nil else { return (.billingRetry, nil) }
            return (EntitlementAccess.state(recorded: .gracePeriod, periodEnd: graceEnd, now: now), graceEnd)
        case .billingRetry:
            return (.billingRetry, graceEnd)
        case .gracePeriodExpired:
            return (renewal?.isInBillingRetryPeriod == false ? .expired : .billingRetry, graceEnd)
        case .currentStatus:
            let state = EntitlementAccess.state(of: transaction, renewal: renewal, now: now)
            return (state, state == .gracePeriod || state == .billingRetry ? graceEnd : nil)
        case .expired:
            return (.expired, nil)
        case .refunded:
            return (.refunded, nil)
        case .revoked:
            return (.revoked, nil)
        }
    }

    static func autoRenewStatusImplied(by subtype: NotificationSubtype?) -> AutoRenewStatus? {
        switch subtype {
        case .autoRenewEnabled?: .on
        case .autoRenewDisabled?: .off
        default: nil
        }
    }

    /// What the app's entitlement check reads: the state, the product and the end date.
    static func entitlementChanged(from old: SubscriptionState?, to new: SubscriptionState) -> Bool {
        guard let old else { return true }
        return old.state != new.state || old.productId != new.productId || old.expiresDate != new.expiresDate
    }

    static func renewalPreferenceChanged(from old: SubscriptionState?, to new: SubscriptionState) -> Bool {
        old?.autoRenewStatus != new.autoRenewStatus || old?.autoRenewProductId != new.autoRenewProductId
    }

    /// A refunded consumable was already used up: the app must claw it back, whatever the state.
    static func consumableRefund(_ event: LifecycleEvent, _ webhooks: LifecycleWebhooks) -> [WebhookEvent] {
        guard event.notificationType == .refund, event.transaction?.type == .consumable else { return [] }
        return [webhooks.notice(.consumableRefunded)]
    }
}
