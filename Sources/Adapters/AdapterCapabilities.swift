import AppleTrust
import IAPConfig
import IAPCore

// What some adapters can do besides verifying presented evidence. The gateway finds them by
// capability (`AdapterRegistry.capability`), never by an adapter's concrete type, so an adapter
// that gains one is found without an edit elsewhere.

/// Apple's live answer about a receipt no client presented just now: one the gateway kept sealed
/// (re-verification) or the one a V1 notification carries.
public protocol ReceiptReverifying: VerificationAdapter {
    func reverify(receipt base64: String, for app: AppPolicy, policy: any EvidencePolicy) async throws(VerificationError)
        -> AdapterOutcome
}

/// What reconciliation reads with the App Store Server API: the app's client (history, statuses,
/// consumption answers) and a status item verified against the app's pinned roots and normalised.
public protocol ReconciliationSource: Sendable {
    func client(for app: AppPolicy) throws(VerificationError) -> AppStoreServerAPIClient
    func verifiedStatus(_ item: LastTransactionsItem, app: AppPolicy)
        async throws(VerificationError) -> (transaction: CanonicalTransaction, renewal: CanonicalRenewal?)
}

/// Support's look-up of the order ID a customer quotes from Apple's receipt e-mail (Look Up Order
/// ID): the order's transactions, each verified against the app's pinned roots, put to `policy`'s
/// identity rule like any other evidence and normalised. An order Apple does not know in any
/// environment `policy` accepts is `ORDER_NOT_FOUND`.
public protocol OrderLookingUp: Sendable {
    func lookUpOrder(_ orderId: String, app: AppPolicy, policy: any EvidencePolicy) async throws(VerificationError)
        -> AdapterOutcome
}

extension AdapterRegistry {
    /// The first registered adapter (by id) that has `capability`; nil when none has.
    public func capability<Capability>(_ capability: Capability.Type) -> Capability? {
        all(capability).first
    }

    /// Every registered adapter that has `capability`, by id.
    public func all<Capability>(_ capability: Capability.Type) -> [Capability] {
        ids.compactMap { adapter($0) as? Capability }
    }
}

/// Apple's signed notification (App Store Server Notifications V2) about an app, read by the
/// adapter that owns that evidence: the outer JWS and every inner one verified against the app's
/// pinned roots and its identity for Apple's own messages, the purchase facts normalised.
public protocol SignedNotificationDecoding: Sendable {
    func decodeSignedNotification(_ signedPayload: String, app: AppPolicy) throws(VerificationError) -> VerifiedNotification
}

/// A V2 notification as its adapter verified it: Apple's payload, and the transaction and renewal
/// it carries in canonical form.
public struct VerifiedNotification: Sendable {
    public var payload: ResponseBodyV2DecodedPayload
    public var transaction: CanonicalTransaction?
    public var renewal: CanonicalRenewal?

    public init(payload: ResponseBodyV2DecodedPayload, transaction: CanonicalTransaction?, renewal: CanonicalRenewal?) {
        self.payload = payload
        self.transaction = transaction
        self.renewal = renewal
    }
}

/// Tells the App Store that the gateway delivered a purchase (Finish Transaction), in the
/// environment the purchase was made in.
public protocol TransactionFinishing: Sendable {
    func finishTransaction(_ transactionId: String, environment: AppStoreEnvironment, app: AppPolicy) async throws(VerificationError)
}
