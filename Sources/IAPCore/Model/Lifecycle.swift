/// One verified fact about a purchase chain from Apple's notifications (or from reconciliation),
/// already normalised: the state machine never sees a JWS, a receipt or a notification body.
public struct LifecycleEvent: Codable, Hashable, Sendable {
    /// `notificationUUID` for V2; a digest of the body for V1; "reconcile:<…>" for reconciliation.
    public var id: String
    public var bundleId: String
    public var notificationType: NotificationType
    public var subtype: NotificationSubtype?
    /// When Apple signed the notification (ms). Orders events: older never overrides newer.
    public var signedDate: Int64
    public var environment: AppStoreEnvironment
    /// The transaction the notification is about (from its verified `signedTransactionInfo`).
    public var transaction: CanonicalTransaction?
    /// The renewal state it carries (from its verified `signedRenewalInfo`).
    public var renewal: CanonicalRenewal?

    public init(id: String, bundleId: String, notificationType: NotificationType, subtype: NotificationSubtype?,
                signedDate: Int64, environment: AppStoreEnvironment, transaction: CanonicalTransaction?,
                renewal: CanonicalRenewal?) {
        self.id = id
        self.bundleId = bundleId
        self.notificationType = notificationType
        self.subtype = subtype
        self.signedDate = signedDate
        self.environment = environment
        self.transaction = transaction
        self.renewal = renewal
    }

    /// The purchase chain this event belongs to, if it names one.
    public var originalTransactionId: String? {
        transaction.map { $0.originalTransactionId ?? $0.transactionId } ?? renewal?.originalTransactionId
    }
}

/// What the gateway believes about one purchase chain (`bundleId`, `originalTransactionId`) now.
public struct SubscriptionState: Codable, Hashable, Sendable {
    public var bundleId: String
    public var originalTransactionId: String
    /// The product the chain entitles now (moves on upgrade at once, on downgrade at renewal).
    public var productId: String
    public var state: Entitlement.State
    public var expiresDate: Int64?
    public var gracePeriodExpiresDate: Int64?
    /// A monthly plan with a commitment: when the commitment ends (never extends access).
    /// Optional so states stored before it existed still decode.
    public var commitmentExpiresDate: Int64?
    public var autoRenewProductId: String?
    public var autoRenewStatus: AutoRenewStatus?
    public var revocationDate: Int64?
    public var revocationReason: RevocationReason?
    public var environment: AppStoreEnvironment
    /// The newest transaction applied (by purchaseDate), and the newest signedDate seen.
    public var lastTransactionId: String?
    public var lastPurchaseDate: Int64?
    public var lastSignedDate: Int64
    /// Which source produced the newest fact ("notification", "reconciliation", an adapter id).
    public var source: String
    /// Which event decided the entitlement fields above (productId … lastPurchaseDate): the state
    /// machine keeps the greatest version, so the result does not depend on delivery order.
    /// Optional so states stored before it existed still decode.
    public var entitlementVersion: LifecycleVersion?
    /// Which event decided `autoRenewStatus` / `autoRenewProductId` (ordered by signedDate alone).
    public var renewalVersion: LifecycleVersion?
}

/// A change the app backend is told about through its webhook (at least once, idempotency key).
public struct WebhookEvent: Codable, Hashable, Sendable {
    public enum Kind: String, Codable, Sendable {
        case entitlementChanged, consumableRefunded, refundDeclined, consumptionRequested, priceIncrease,
             renewalPreferenceChanged, unknownNotification, test, consentRescinded
        /// The gateway's own: a receipt rollout's guard rolled it back (`rollout` says from where, and why).
        case rolloutRolledBack = "rollout.rolledBack"
    }
    public var kind: Kind
    /// Stable per (event, chain): a redelivered notification yields the same key.
    public var idempotencyKey: String
    public var bundleId: String
    public var originalTransactionId: String?
    public var transactionId: String?
    public var productId: String?
    public var state: Entitlement.State?
    public var expiresDate: Int64?
    public var notificationType: String
    public var subtype: String?
    public var occurredAt: Int64
    /// The notification's transaction was revoked: how (`REFUND_PRORATED`, …) and, for a prorated
    /// refund, the share refunded in milliunits — the app backend decides what a partial refund costs.
    public var revocationType: RevocationType?
    public var revocationPercentage: Int64?
    /// A monthly plan's commitment end, beside the monthly `expiresDate`.
    public var commitmentExpiresDate: Int64?
    /// A rollout's change (`rolloutRolledBack`).
    public var rollout: RolloutNotice? = nil
}

/// What a rollout event tells the app backend: the cohort's share before and after, why, and the
/// purchase chains (original transaction ids) the reason names.
public struct RolloutNotice: Codable, Hashable, Sendable {
    public var fromPercent: Int
    public var toPercent: Int
    public var reason: String
    public var purchases: [String]

    public init(fromPercent: Int, toPercent: Int, reason: String, purchases: [String]) {
        self.fromPercent = fromPercent
        self.toPercent = toPercent
        self.reason = reason
        self.purchases = purchases
    }
}

extension WebhookEvent {
    /// A rollout's rollback, once per change (`key`: the app's rollout revision it made).
    public static func rolloutRolledBack(bundleId: String, key: String, at: Int64, _ notice: RolloutNotice) -> WebhookEvent {
        WebhookEvent(kind: .rolloutRolledBack, idempotencyKey: key, bundleId: bundleId, originalTransactionId: nil,
                     transactionId: nil, productId: nil, state: nil, expiresDate: nil, notificationType: "ROLLOUT",
                     subtype: nil, occurredAt: at, revocationType: nil, revocationPercentage: nil,
                     commitmentExpiresDate: nil, rollout: notice)
    }
}

/// What applying one event did: the chain's new state (nil: unchanged or no chain), the events to
/// send, and whether the type was one the gateway does not know (stored, counted, surfaced).
public struct LifecycleOutcome: Hashable, Sendable {
    public var newState: SubscriptionState?
    public var webhooks: [WebhookEvent] = []
    public var unknownType = false
    /// True when the event was older than the state and changed nothing (kept for audit).
    public var stale = false
}
