import Adapters
import AppleTrust
import Foundation
import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// POST /v1/apps/{bundleId}/verify: evidence verified by an adapter (or the migration router),
/// ruled on once (`PurchaseRuling`), claimed in the ledger and judged inside the claim
/// (`VerifyJudge`: the verdict and the attempt's one audit record), and answered with the
/// account's entitlements as they stand now.
struct VerifyEndpoint: Sendable {
    let adapters: AdapterRegistry
    let ledger: any Ledger
    let checks: [any PurchaseCheck]
    /// Shadow, compare and cutover routing of receipts; nil: receipts take the primary path only.
    let migration: MigrationRouter?
    /// Seals the newest legacy receipt for later re-verification; nil: receipts are not kept.
    let sealer: AESGCMSealer?
    let metrics: GatewayMetrics
    let logger: Logger
    let now: @Sendable () -> Int64

    /// What the evidence's own steps keep (nonces, sealed receipts), for the keyed request `key` (if any).
    func store(for key: IdempotentWrite?) -> LedgerEvidenceStore {
        LedgerEvidenceStore(ledger: ledger, sealer: sealer, metrics: metrics, logger: logger, now: now,
                            request: key?.requestIdentity)
    }

    /// `key`: the request's `Idempotency-Key`; the answer is stored under it in the claim's transaction.
    func answer(_ request: HTTPRequest, app: AppPolicy, key: IdempotentWrite?) async throws(VerificationError) -> HTTPResponse {
        // The members and their meaning come from the registered adapters' evidence forms.
        let forms = adapters.evidenceForms
        let body = try RequestBody(request, allowed: RequestBody.verifyMembers(forms))
        let account = try body.account()
        let evidence = try body.evidence(forms)
        var attempt = VerifyAttempt(request, app: app, account: account, evidence: evidence, now: now())
        let result: Result<String, VerificationError> = await AppleAnswerNote.$current.withValue(attempt.appleAnswers) {
            do throws(VerificationError) {
                return .success(try await verifyAndClaim(evidence, account: account, app: app, key: key, attempt: &attempt))
            } catch {
                return .failure(error)
            }
        }
        switch result {
        case .success(let answer):
            // Its audit record was written by the claim, in the claim's transaction.
            logger.info("verified", ["bundleId": app.bundleId, "adapter": attempt.adapter ?? "", "evidence": evidence.kind.rawValue,
                                     "transactions": String(attempt.transactionCount)])
            return .json(200, answer)
        case .failure(let error):
            await recordAudit(attempt.refused(error.code))
            metrics.recordRefusal(code: error.code.rawValue)
            metrics.recordAppleFailure(app: app.bundleId, code: error.code)
            throw error
        }
    }

    /// The answer's body, as the claim stored it.
    private func verifyAndClaim(_ evidence: PurchaseEvidence, account: String, app: AppPolicy, key: IdempotentWrite?,
                                attempt: inout VerifyAttempt) async throws(VerificationError) -> String {
        let store = store(for: key)
        // The kind's own step first (a receipt's nonce: spent before Apple is asked, one attempt per
        // nonce, and per keyed request: its retry may present it again).
        try await adapters.form(of: evidence.kind)?.checkIn?.beforeVerifying(evidence, account: account, app: app, store: store)
        let outcome: AdapterOutcome
        var comparison: PurchaseComparison?
        if let migration, MigrationRouter.applies(to: evidence, app: app, adapters: adapters) {
            let answer = try await migration.run(evidence, account: account, app: app, adapters: adapters,
                                                 evidenceSHA256: attempt.evidenceSHA256)
            attempt.adapter = answer.answeringAdapter.rawValue
            comparison = answer.comparison
            outcome = try answer.outcome.get()
        } else {
            let adapter = try adapters.primary(for: evidence, app: app)
            attempt.adapter = adapter.id.rawValue
            outcome = try await adapter.verify(evidence, for: app, policy: ClaimPolicy(app: app, claimant: .account(account)))
        }
        attempt.verified(outcome)

        let context = ClaimContext(app: app, account: account, evidenceKind: evidence.kind, now: now())
        let ruling = try PurchaseRuling(outcome, context, checks: checks)
        // One ledger step: binds, grants, reads back the ledger's view (a newer notification may
        // already know better) and hands it to the judge, which decides the answer, its verdict and
        // its audit record from that view; the answer is stored under the request's key.
        var purchase = PurchaseClaim(bundleId: app.bundleId, account: account,
                                     transactions: outcome.transactions, entitlements: ruling.entitlements,
                                     now: context.now, factTimes: Self.factTimes(outcome, now: context.now))
        purchase.judge = VerifyJudge(account: account, app: app, evidenceKind: evidence.kind, outcome: outcome,
                                     ruling: ruling, now: context.now, comparison: comparison, attempt: attempt)
        purchase.idempotency = key
        // Queued inside the claim, so only a durable grant is ever reported delivered to Apple.
        purchase.finishIfNewlyGranted = ruling.finishing(outcome, app: app)
        purchase.appPurchaseKeys = ruling.grandfathering.appPurchaseKeys
        let claimed = try await ledger.claim(purchase)
        for step in outcome.followUps { await step.afterClaim(outcome, bundleId: app.bundleId, store: store) }
        guard let answer = claimed.answer else { throw VerificationError(.internalError, "the claim built no answer") }
        return answer.body
    }

    /// When Apple stated each chain's facts: a live answer (verifyReceipt, Server API lookups) is
    /// `now`'s truth; a signed transaction checked locally only is as old as its `signedDate`.
    static func factTimes(_ outcome: AdapterOutcome, now: Int64) -> [String: Int64] {
        var times: [String: Int64] = [:]
        for t in outcome.transactions {
            let chain = t.originalTransactionId ?? t.transactionId
            let time = t.signedDate ?? now
            times[chain] = max(times[chain] ?? time, time)
        }
        return times
    }

    /// An audit row that cannot be written is logged and counted: loud, but not a reason to take
    /// back an answer Apple already gave. A refusal because storage is unavailable is not written
    /// at all: the write would wait out the storage deadline a second time before the client hears.
    private func recordAudit(_ record: AuditRecord) async {
        do throws(VerificationError) {
            if record.errorCode == .storageUnavailable {
                throw VerificationError(.storageUnavailable, "storage is unavailable")
            }
            try await ledger.recordAudit(record)
        } catch {
            metrics.recordLostWrite("audit")
            logger.error("audit_not_written", ["bundleId": record.bundleId, "code": error.code.rawValue])
        }
    }
}
