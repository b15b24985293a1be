import Adapters
import IAPConfig
import IAPCore
import Ledger

/// The verify answer, judged inside the claim's transaction from what the claim stored: the one
/// place a verify's verdict is decided (`VerifyVerdict.of`, once), with the revocation the ledger
/// reports since the evidence (`RevocationRuling`), and the one place its audit record is completed
/// for a 200. What it shows beside that was decided before the claim (`PurchaseRuling`).
struct VerifyJudge: ClaimJudge {
    let account: String
    let app: AppPolicy
    let evidenceKind: AppPolicy.EvidenceKind
    let outcome: AdapterOutcome
    let ruling: PurchaseRuling
    /// The answer's time (the claim's `now`).
    let now: Int64
    let comparison: PurchaseComparison?
    let attempt: VerifyAttempt

    func judge(_ claimed: ClaimOutcome) throws(VerificationError) -> ClaimAnswer {
        try ruling.revocation.refuseIfRevokedSince(claimed)
        let revoked = ruling.revocation.revoked
        let stored = Self.standing(claimed.entitlements, chains: ruling.chains, now: now)
        let verdict = VerifyVerdict.of(stored, policy: app.gracePeriodPolicy)
        let answer = VerifyEndpoint.Answer(
            account: account, verdict: verdict, outcome: outcome,
            newlyGranted: claimed.newlyGranted.filter { !revoked.contains($0) },
            alreadyGranted: claimed.alreadyGranted.filter { !revoked.contains($0) },
            revoked: outcome.transactions.map(\.transactionId).filter { revoked.contains($0) },
            entitlements: stored.map { EntitlementsEndpoint.Shown($0, policy: app) },
            comparison: comparison, appTransaction: evidenceKind.isAppTransaction ? outcome.appTransaction : nil,
            grandfathered: ruling.grandfathering.answered)
        return ClaimAnswer(audit: attempt.answered(verdict.audited), body: VerifyEndpoint.answerShape.encode(answer).jsonText)
    }

    /// The evidence's chains of the claim's read-back entitlements, as they stand now: the claim
    /// stored facts, the clock may have ended some since they were signed. The answer and its audit
    /// verdict are both decided from these.
    static func standing(_ stored: [Entitlement], chains: Set<String>, now: Int64) -> [Entitlement] {
        stored.filter { chains.contains($0.originalTransactionId) }.map { EntitlementAccess.current($0, now: now) }
    }
}
