import Adapters
import IAPConfig
import IAPCore

/// Every decision a verify makes about verified evidence before it is claimed, each made once, in
/// the order its refusals are most useful to a caller, and handed on: what the app's own purchase
/// grants (`GrandfatheringGrant`), the purchase checks, what is refunded or revoked
/// (`RevocationRuling`), and the entitlements the facts give now (`EntitlementCalculator`). The
/// claim binds and stores what this decided; the answer's verdict is decided from what the claim
/// read back (`VerifyJudge`).
struct PurchaseRuling: Sendable {
    let grandfathering: GrandfatheringGrant
    let revocation: RevocationRuling
    /// One per purchase chain of the evidence, and what the app's own purchase grants.
    let entitlements: [Entitlement]

    init(_ outcome: AdapterOutcome, _ context: ClaimContext, checks: [any PurchaseCheck]) throws(VerificationError) {
        grandfathering = GrandfatheringGrant(outcome, context)
        // Evidence that proves no purchase grants nothing: refused rather than answered "ok, nothing".
        // An app transaction is the app's own purchase (what it grants is the grandfathering rule's);
        // a receipt without in-app purchases still proves a grandfathered download.
        guard !outcome.transactions.isEmpty || context.evidenceKind.isAppTransaction
                || !grandfathering.entitlements.isEmpty else {
            throw VerificationError(.noTransactions, "the evidence carries no in-app purchase")
        }
        try checks.run(outcome, context)
        revocation = try RevocationRuling(outcome, evidenceKind: context.evidenceKind)
        entitlements = EntitlementCalculator.entitlements(account: context.account, transactions: outcome.transactions,
                                                          renewals: outcome.renewals, catalog: context.app.productCatalog,
                                                          now: context.now) + grandfathering.entitlements
    }

    /// The evidence's chains, which the answer shows.
    var chains: Set<String> { Set(entitlements.map(\.originalTransactionId)) }

    /// What the claim queues for Finish Transaction if it grants them first: with the app's
    /// `finishTransactions`, every purchase of the evidence but the refunded and revoked ones.
    func finishing(_ outcome: AdapterOutcome, app: AppPolicy) -> Set<String> {
        guard app.finishTransactions else { return [] }
        return Set(outcome.transactions.map(\.transactionId)).subtracting(revocation.revoked)
    }
}
