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
        let sub = subtype?.rawValue
        func when(_ allowed: [String?], _ effect: Effect, _ notices: [WebhookEvent.Kind] = []) -> Self {
            allowed.contains(sub) ? Self(effect: effect, notices: notices) : Self(effect: .unknown)
        }
        switch type.rawValue {
        case "SUBSCRIBED":
            return when(["INITIAL_BUY", "RESUBSCRIBE"], .decides(.transactionDates))
        case "DID_RENEW":
            return when([nil, "BILLING_RECOVERY"], .decides(.transactionDates))
        case "DID_CHANGE_RENEWAL_PREF":
            // UPGRADE: Apple bills the new product at once and its transaction starts now.
            // DOWNGRADE (or no subtype: the customer went back to the current product): only
            // autoRenewProductId moves; the product changes with the next DID_RENEW.
            if sub == "UPGRADE" { return Self(effect: .decides(.transactionDates)) }
            return when([nil, "DOWNGRADE"], .informs)
        case "DID_CHANGE_RENEWAL_STATUS":
            return when(["AUTO_RENEW_ENABLED", "AUTO_RENEW_DISABLED"], .informs)
        case "OFFER_REDEEMED":
            // A downgrade offer applies from the next renewal; the others start or confirm a period.
            if sub == "DOWNGRADE" { return Self(effect: .informs) }
            return when([nil, "INITIAL_BUY", "RESUBSCRIBE", "UPGRADE"], .decides(.transactionDates))
        case "DID_FAIL_TO_RENEW":
            if sub == "GRACE_PERIOD" { return Self(effect: .decides(.gracePeriod)) }
            return when([nil], .decides(.billingRetry))
        case "GRACE_PERIOD_EXPIRED":
            return when([nil], .decides(.gracePeriodExpired))
        case "EXPIRED":
            return when([nil, "VOLUNTARY", "BILLING_RETRY", "PRICE_INCREASE", "PRODUCT_NOT_FOR_SALE"],
                        .decides(.expired))
        case "PRICE_INCREASE":
            return when(["PENDING", "ACCEPTED"], .informs, [.priceIncrease])
        case "REFUND":
            return when([nil], .decides(.refunded))
        case "REFUND_DECLINED":
            return when([nil], .informs, [.refundDeclined])
        case "REFUND_REVERSED":
            // Apple removes the revocation fields from the transaction: its dates decide again.
            return when([nil], .decides(.transactionDates))
        case "REVOKE":
            return when([nil], .decides(.revoked))
        case "CONSUMPTION_REQUEST":
            return when([nil], .informs, [.consumptionRequested])
        case "RENEWAL_EXTENDED":
            return when([nil], .decides(.transactionDates))
        case "RENEWAL_EXTENSION":
            // SUMMARY ends a mass extension (each chain got its own RENEWAL_EXTENDED); FAILURE
            // says one chain was not extended, so it keeps the expiresDate it had.
            return when(["SUMMARY", "FAILURE"], .noChain)
        case "ONE_TIME_CHARGE":
            return when([nil], .decides(.transactionDates))
        case "TEST":
            return when([nil], .noChain, [.test])
        case "EXTERNAL_PURCHASE_TOKEN":
            return when([nil, "UNREPORTED"], .noChain)
        case "METADATA_UPDATE", "MIGRATION", "PRICE_CHANGE":
            // Advanced Commerce changes to a subscription's description or price: nothing the
            // entitlement depends on; the renewal info they carry is still recorded.
            return when([nil] + NotificationSubtype.known.map(\.rawValue), .informs)
        case SubscriptionLifecycle.reconciledStatus.rawValue:
            return when([nil], .decides(.currentStatus))
        case "RESCIND_CONSENT":
            return when([nil], .noChain, [.consentRescinded])
        default:
            return Self(effect: .unknown)
        }
    }
}
