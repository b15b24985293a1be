/// What one notificationType/subtype means for a purchase chain, decided from Apple's
/// documentation of each type, before any state is looked at.
struct LifecycleClassification: Equatable {
    enum Effect: Equatable {
        /// States the entitlement of the chain: competes for the entitlement register.
        case decides(EntitlementRule)
        /// Mentions the chain without changing what it entitles (renewal info is still recorded).
        case informs
        /// Concerns no single chain (TEST, summaries, consent, external purchase tokens).
        case noChain
        /// A type, or a subtype of a known type, this gateway does not know: nothing changes.
        case unknown
    }

    /// How a decisive event turns into `Entitlement.State` (evaluated at `now`).
    enum EntitlementRule: Equatable {
        /// What the transaction's own dates say: active until expiresDate, refunded/revoked if it
        /// carries a revocationDate. Used by every event that starts, renews or restores a period.
        case transactionDates
        /// DID_FAIL_TO_RENEW GRACE_PERIOD: entitled until gracePeriodExpiresDate, then retrying.
        case gracePeriod
        /// DID_FAIL_TO_RENEW without subtype: Apple retries billing; access is the policy's call.
        case billingRetry
        /// GRACE_PERIOD_EXPIRED: Apple may still be retrying (billingRetry) unless it says not.
        case gracePeriodExpired
        case expired
        case refunded
        /// Family Sharing revocation: the purchaser stopped sharing; no money moved.
        case revoked
        /// A status read back from Apple (Get All Subscription Statuses): the transaction's dates
        /// and the renewal info's retry/grace fields together say where the chain is.
        case currentStatus
    }

    var effect: Effect
    /// Webhooks this type always produces besides `entitlementChanged` (at-least-once, stable keys).
    var notices: [WebhookEvent.Kind] = []

    static func classify(_ type: NotificationType, _ subtype: NotificationSubtype?) -> Self {
        let sub = subtype
        func when(_ allowed: [NotificationSubtype?], _ effect: Effect, _ notices: [WebhookEvent.Kind] = []) -> Self {
            allowed.contains(sub) ? Self(effect: effect, notices: notices) : Self(effect: .unknown)
        }
        switch type {
        case .subscribed:
            return when([.initialBuy, .resubscribe], .decides(.transactionDates))
        case .didRenew:
            return when([nil, .billingRecovery], .decides(.transactionDates))
        case .didChangeRenewalPref:
            // UPGRADE: Apple bills the new product at once and its transaction starts now.
            // DOWNGRADE (or no subtype: the customer went back to the current product): only
            // autoRenewProductId moves; the product changes with the next DID_RENEW.
            if sub == .upgrade { return Self(effect: .decides(.transactionDates)) }
            return when([nil, .downgrade], .informs)
        case .didChangeRenewalStatus:
            return when([.autoRenewEnabled, .autoRenewDisabled], .informs)
        case .offerRedeemed:
            // A downgrade offer applies from the next renewal; the others start or confirm a period.
            if sub == .downgrade { return Self(effect: .informs) }
            return when([nil, .initialBuy, .resubscribe, .upgrade], .decides(.transactionDates))
        case .didFailToRenew:
            if sub == .gracePeriod { return Self(effect: .decides(.gracePeriod)) }
            return when([nil], .decides(.billingRetry))
        case .gracePeriodExpired:
            return when([nil], .decides(.gracePeriodExpired))
        case .expired:
            return when([nil, .voluntary, .billingRetry, .priceIncrease, .productNotForSale],
                        .decides(.expired))
        case .priceIncrease:
            return when([.pending, .accepted], .informs, [.priceIncrease])
        case .refund:
            return when([nil], .decides(.refunded))
        case .refundDeclined:
            return when([nil], .informs, [.refundDeclined])
        case .refundReversed, .renewalExtended, .oneTimeCharge:
            // REFUND_REVERSED: Apple removes the revocation fields from the transaction, so its dates
            // decide again, as they do for an extended renewal or a one-time charge.
            return when([nil], .decides(.transactionDates))
        case .revoke:
            return when([nil], .decides(.revoked))
        case .consumptionRequest:
            return when([nil], .informs, [.consumptionRequested])
        case .renewalExtension:
            // SUMMARY ends a mass extension (each chain got its own RENEWAL_EXTENDED); FAILURE
            // says one chain was not extended, so it keeps the expiresDate it had.
            return when([.summary, .failure], .noChain)
        case .test:
            return when([nil], .noChain, [.test])
        case .externalPurchaseToken:
            return when([nil, .unreported], .noChain)
        case .metadataUpdate, .migration, .priceChange:
            // Advanced Commerce changes to a subscription's description or price: nothing the
            // entitlement depends on; the renewal info they carry is still recorded.
            return when([nil] + NotificationSubtype.known.map(Optional.some), .informs)
        case SubscriptionLifecycle.reconciledStatus:
            return when([nil], .decides(.currentStatus))
        case .rescindConsent:
            return when([nil], .noChain, [.consentRescinded])
        default:
            return Self(effect: .unknown)
        }
    }
}
