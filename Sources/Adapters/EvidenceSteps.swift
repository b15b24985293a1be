import IAPConfig
import IAPCore

// Steps one kind of evidence needs around its verification, beyond verifying it: a receipt's nonce
// is spent before anything is asked, the newest receipt Apple returns is kept for re-verification.
// They belong to the kind's form and the adapter that produces the outcome, not to the gateway's
// generic path, which only runs them.

/// Where evidence steps keep what they must; the gateway implements it over its ledger and sealer.
public protocol EvidenceStore: Sendable {
    /// Spends a nonce the gateway issued for this app and account (refused if unknown, spent or expired).
    func consumeNonce(_ nonce: String, bundleId: String, account: String) async throws(VerificationError)
    /// Keeps `receipt` sealed, bound to each chain, for later re-verification. A failure is the
    /// store's to report: the claim it follows stands.
    func keepReceipt(_ receipt: String, bundleId: String, chains: [String]) async
}

/// A step a kind of evidence takes before any adapter verifies it, whichever adapter routing picks.
public protocol EvidenceCheckIn: Sendable {
    func beforeVerifying(_ evidence: PurchaseEvidence, account: String, app: AppPolicy,
                         store: any EvidenceStore) async throws(VerificationError)
}

/// A step an adapter's outcome asks for once the claim it supports is stored.
public protocol ClaimFollowUp: Sendable {
    func afterClaim(_ outcome: AdapterOutcome, bundleId: String, store: any EvidenceStore) async
}
