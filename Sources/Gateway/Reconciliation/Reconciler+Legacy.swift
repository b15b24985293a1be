import Adapters
import AppleTrust
import Foundation
import IAPConfig
import IAPCore
import Ledger

/// Apps without Server API credentials: the sealed latest receipt of each chain is opened and
/// sent to verifyReceipt again, and what Apple says now about each chain it holds becomes a
/// reconciled event. verifyReceipt signs nothing, so the event's date is the newest date its facts
/// state (purchase, revocation, or an expiry already past): the same facts give the same id.
extension Reconciler {
    func reverifyReceipts(_ app: AppPolicy, into report: inout ReconciliationReport) async {
        guard let legacy, let sealer else { return }
        let chains: [String]
        do { chains = try await ledger.chainsWithLatestReceipt(bundleId: app.bundleId, limit: options.maxChainsPerApp) } catch {
            return report.fail(app.bundleId, "receipts", error)
        }
        // A receipt holds every chain of its customer: each distinct receipt is sent once.
        var sent = Set<String>()
        for chain in chains {
            do throws(VerificationError) {
                guard let sealed = try await ledger.latestReceipt(bundleId: app.bundleId, originalTransactionId: chain) else { continue }
                let binding = Array("\(app.bundleId)\0\(chain)".utf8)
                let receipt = String(decoding: try sealer.open(Array(sealed), associatedData: binding), as: UTF8.self)
                guard sent.insert(SHA256Digest.lowercaseHex(receipt)).inserted else { continue }
                // The owner decides whether Sandbox answers are acceptable (App Review accounts).
                let account = try await ledger.owner(bundleId: app.bundleId, originalTransactionId: chain) ?? ""
                let outcome = try await legacy.reverify(receipt: receipt, for: app,
                                                        policy: ClaimPolicy(app: app, claimant: .account(account)))
                report.receiptsReverified += 1
                report.receiptEventsEnqueued += try await enqueueReceiptFacts(outcome, app: app)
                // The adapter's own follow-ups (verifyReceipt: keep the newest receipt it returned).
                let store = LedgerEvidenceStore(ledger: ledger, sealer: sealer, metrics: nil, logger: logger, now: now)
                for step in outcome.followUps { await step.afterClaim(outcome, bundleId: app.bundleId, store: store) }
            } catch {
                report.fail(app.bundleId, "receipts", error)
            }
        }
    }

    private func enqueueReceiptFacts(_ outcome: AdapterOutcome, app: AppPolicy) async throws(VerificationError) -> Int {
        let now = now()
        var latestByChain: [String: CanonicalTransaction] = [:]
        for t in outcome.transactions {
            let chain = t.originalTransactionId ?? t.transactionId
            if let held = latestByChain[chain], (held.purchaseDate ?? 0, held.transactionId) >= (t.purchaseDate ?? 0, t.transactionId) {
                continue
            }
            latestByChain[chain] = t
        }
        var enqueued = 0
        for (chain, transaction) in latestByChain.sorted(by: { $0.key < $1.key }) {
            var transaction = transaction
            if transaction.environment == nil { transaction.environment = outcome.environment }
            // Past as every reader of access judges it, so the event's date is the expiry exactly
            // when the entitlement read already says expired.
            let expired = transaction.expiresDate.flatMap { EntitlementAccess.ended($0, now: now) ? $0 : nil }
            let signedDate = [transaction.purchaseDate, transaction.revocationDate, expired].compactMap { $0 }.max() ?? 0
            let raw = JSONValue.object(["source": .string("verifyReceipt"), "originalTransactionId": .string(chain)])
            if try await enqueueReconciled(app: app, chain: chain, signedDate: signedDate, transaction: transaction,
                                     renewal: outcome.renewals.first { $0.originalTransactionId == chain },
                                     version: "1", rawBody: Data(raw.jsonText.utf8)) {
                enqueued += 1
            }
        }
        return enqueued
    }
}
