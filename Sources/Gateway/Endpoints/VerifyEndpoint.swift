import Adapters
import AppleTrust
import Foundation
import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// POST /v1/apps/{bundleId}/verify: evidence verified by an adapter (or the migration router),
/// judged by the purchase checks, claimed in the ledger, audited, and answered with the account's
/// entitlements as they stand now.
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
        let log = logger
        // The members and their meaning come from the registered adapters' evidence forms.
        let forms = adapters.evidenceForms
        let body = try RequestBody(request, allowed: RequestBody.verifyMembers(forms))
        let account = try body.account()
        let evidence = try body.evidence(forms)
        let started = DispatchTime.now().uptimeNanoseconds
        var audit = AuditRecord(time: now(), bundleId: app.bundleId, account: account,
                                evidenceKind: evidence.kind.rawValue, evidenceSHA256: Self.evidenceDigest(evidence),
                                transactionIds: [], productIds: [], environment: nil, verdict: .refused,
                                errorCode: nil, adapter: nil, latencyMicros: 0, requestId: request.requestId,
                                clientVersion: AuditRecord.clientVersion(request.headers["X-Client-Version"]))
        // What Apple answers on the way is noted by the adapters for the audit record.
        let appleAnswers = AppleAnswerNote()
        do {
            // The answered record is written by the claim itself, in its transaction.
            let attempt: Result<String, VerificationError> = await AppleAnswerNote.$current.withValue(appleAnswers) {
                do throws(VerificationError) {
                    return .success(try await verifyAndClaim(evidence, account: account, app: app, key: key, audit: &audit,
                                                             started: started))
                } catch {
                    return .failure(error)
                }
            }
            let result = try attempt.get()
            log.info("verified", ["bundleId": app.bundleId, "adapter": audit.adapter ?? "", "evidence": evidence.kind.rawValue,
                                  "transactions": String(audit.transactionIds.count)])
            return .json(200, result)
        } catch {
            audit.errorCode = error.code
            audit.appleStatus = appleAnswers.summary
            audit.latencyMicros = Int64((DispatchTime.now().uptimeNanoseconds - started) / 1000)
            await recordAudit(audit, log)
            metrics.recordRefusal(code: error.code.rawValue)
            throw error
        }
    }

    /// The answer's body, as the claim stored it.
    private func verifyAndClaim(_ evidence: PurchaseEvidence, account: String, app: AppPolicy, key: IdempotentWrite?,
                                audit: inout AuditRecord, started: UInt64)
        async throws(VerificationError) -> String {
        let store = store(for: key)
        // The kind's own step first (a receipt's nonce: spent before Apple is asked, one attempt per
        // nonce, and per keyed request: its retry may present it again).
        try await adapters.form(of: evidence.kind)?.checkIn?.beforeVerifying(evidence, account: account, app: app, store: store)
        let outcome: AdapterOutcome
        var comparison: PurchaseComparison?
        if let migration, MigrationRouter.applies(to: evidence, app: app, adapters: adapters) {
            let answer = try await migration.run(evidence, account: account, app: app, adapters: adapters,
                                                 evidenceSHA256: audit.evidenceSHA256)
            audit.adapter = answer.answeringAdapter.rawValue
            comparison = answer.comparison
            outcome = try answer.outcome.get()
        } else {
            let adapter = try adapters.primary(for: evidence, app: app)
            audit.adapter = adapter.id.rawValue
            outcome = try await adapter.verify(evidence, for: app, policy: ClaimPolicy(app: app, claimant: .account(account)))
        }
        audit.environment = outcome.environment.rawValue
        audit.transactionIds = outcome.transactions.map(\.transactionId)
        audit.productIds = Array(Set(outcome.transactions.map(\.productId))).sorted()

        let context = ClaimContext(app: app, account: account, evidenceKind: evidence.kind, now: now())
        try checks.run(outcome, context)

        let grandfathered = GrandfatheringGrant.entitlements(outcome, context)
        let entitlements = EntitlementCalculator.entitlements(account: account, transactions: outcome.transactions,
                                                              renewals: outcome.renewals, catalog: app.productCatalog,
                                                              now: context.now) + grandfathered
        var answered = audit
        answered.appleStatus = AppleAnswerNote.current?.summary
        answered.latencyMicros = Int64((DispatchTime.now().uptimeNanoseconds - started) / 1000)
        let chains = Set(entitlements.map(\.originalTransactionId))
        // One ledger step: refuses a chain refunded after this evidence was signed, binds, grants,
        // reads back the ledger's view (a newer notification may already know better), and builds
        // the answer and its audit verdict from that view, storing the answer under the request's key.
        var purchase = PurchaseClaim(bundleId: app.bundleId, account: account,
                                     transactions: outcome.transactions, entitlements: entitlements,
                                     now: context.now, factTimes: Self.factTimes(outcome, now: context.now),
                                     presentedTransactionId: outcome.presentedTransactionId, audit: answered)
        let shown = AnswerShape(account: account, app: app, outcome: outcome, chains: chains, now: context.now,
                                comparison: comparison,
                                grandfathered: context.evidenceKind.isAppTransaction
                                    || (context.evidenceKind == .receipt && app.grandfathering != nil)
                                    ? !grandfathered.isEmpty : nil,
                                appTransaction: context.evidenceKind.isAppTransaction ? outcome.appTransaction : nil)
        purchase.answer = { shown.answer(to: $0) }
        purchase.idempotency = key
        // Queued inside the claim, so only a durable grant is ever reported delivered to Apple.
        purchase.finishNewlyGranted = app.finishTransactions
        purchase.appPurchaseKeys = grandfathered.map(\.originalTransactionId)
        let claim = try await ledger.claim(purchase)
        audit = answered
        for step in outcome.followUps { await step.afterClaim(outcome, bundleId: app.bundleId, store: store) }
        guard let body = claim.answer else { throw VerificationError(.internalError, "the claim built no answer") }
        return body
    }

    /// What a verify answer shows, decided before the claim; `answer(to:)` completes it from what the
    /// claim stored, inside the claim's transaction.
    private struct AnswerShape: Sendable {
        let account: String
        let app: AppPolicy
        let outcome: AdapterOutcome
        let chains: Set<String>
        let now: Int64
        let comparison: PurchaseComparison?
        /// Whether the app's own purchase granted something; nil: not said for this evidence.
        let grandfathered: Bool?
        let appTransaction: CanonicalAppTransaction?

        func answer(to claim: ClaimOutcome) -> ClaimAnswer {
            // Refunded and revoked purchases are answered as such, never as granted (a backend that
            // credits per newly granted id must not pay out a refund).
            let revoked = Set(outcome.transactions.filter { $0.revocationDate != nil }.map(\.transactionId))
            let stored = VerifyEndpoint.standing(claim.entitlements, chains: chains, now: now)
            let verdict = VerifyVerdict.of(stored, policy: app.gracePeriodPolicy)
            let answer = Answer(
                account: account, verdict: verdict, outcome: outcome,
                newlyGranted: claim.newlyGranted.filter { !revoked.contains($0) },
                alreadyGranted: claim.alreadyGranted.filter { !revoked.contains($0) },
                revoked: outcome.transactions.map(\.transactionId).filter { revoked.contains($0) },
                entitlements: stored.map { EntitlementsEndpoint.Shown($0, policy: app) },
                comparison: comparison, appTransaction: appTransaction, grandfathered: grandfathered)
            return ClaimAnswer(verdict: verdict.audited, body: VerifyEndpoint.answerShape.encode(answer).jsonText)
        }
    }

    /// The evidence's chains of the claim's read-back entitlements, as they stand now: the claim
    /// stored facts, the clock may have ended some since they were signed. The answer and its audit
    /// verdict are both decided from these.
    static func standing(_ stored: [Entitlement], chains: Set<String>, now: Int64) -> [Entitlement] {
        stored.filter { chains.contains($0.originalTransactionId) }.map { EntitlementAccess.current($0, now: now) }
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
    private func recordAudit(_ record: AuditRecord, _ log: Logger) async {
        do throws(VerificationError) {
            if record.errorCode == .storageUnavailable {
                throw VerificationError(.storageUnavailable, "storage is unavailable")
            }
            try await ledger.recordAudit(record)
        } catch {
            metrics.recordLostWrite("audit")
            log.error("audit_not_written", ["bundleId": record.bundleId, "code": error.code.rawValue])
        }
    }

    /// The audit trail keeps a digest of the evidence, never the evidence.
    static func evidenceDigest(_ evidence: PurchaseEvidence) -> String {
        SHA256Digest.lowercaseHex(evidence.value)
    }
}
