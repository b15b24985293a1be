import IAPCore

/// Whose history support asks for: one account's, or the account owning one transaction's chain.
public enum SupportSubject: Hashable, Sendable {
    case account(String)
    case transaction(String)
}

/// What support sees of one account or purchase (`GET .../history`, `iapgw audit`): every
/// verification attempt since a time, newest first, and each purchase chain involved with its owner
/// and what is known of its history. Evidence appears only as its digest.
public struct SupportHistory: Hashable, Sendable {
    public var attempts: [AuditRecord]
    public var chains: [PurchaseChainHistory]
    /// More attempts matched than `limit`: the oldest were left out.
    public var truncated: Bool
}

/// One purchase chain as the ledger knows it: who owns it since when, each granted transaction
/// (the first purchase, then renewals; a revocationDate is a refund or revocation), the
/// entitlement and lifecycle state now, and the notifications Apple sent about it.
public struct PurchaseChainHistory: Hashable, Sendable {
    public struct Grant: Hashable, Sendable {
        public var transaction: CanonicalTransaction
        /// When the gateway first granted it, and last updated its facts (ms since 1970).
        public var firstGrantedAt: Int64
        public var updatedAt: Int64
    }

    public struct Notification: Hashable, Sendable {
        public var notificationType: String
        public var subtype: String?
        public var signedDate: Int64
        public var receivedAt: Int64
        public var environment: String
        /// "processed", "parked" (given up after retries) or "pending".
        public var status: String
    }

    public var originalTransactionId: String
    public var owner: String
    public var boundAt: Int64
    public var grants: [Grant]
    public var entitlement: Entitlement?
    public var subscription: SubscriptionState?
    public var notifications: [Notification]
}
