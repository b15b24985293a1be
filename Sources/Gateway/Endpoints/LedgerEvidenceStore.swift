import Adapters
import AppleTrust
import Foundation
import IAPCore
import Ledger

/// Where evidence steps keep what they must: nonces in the ledger, receipts sealed with the
/// gateway's key (AES-256-GCM, bound to bundle and chain) beside their chain. Never logs a receipt.
struct LedgerEvidenceStore: EvidenceStore {
    let ledger: any Ledger
    /// nil: receipts are not kept.
    let sealer: AESGCMSealer?
    /// Counts a receipt that could not be kept; nil: counted nowhere (reconciliation reports by log).
    let metrics: GatewayMetrics?
    let logger: Logger
    let now: @Sendable () -> Int64
    /// The keyed request the steps run for (`IdempotentWrite.requestIdentity`): its retry may
    /// present the nonce its first attempt spent. nil: no key, a nonce is spent once.
    var request: String?

    func consumeNonce(_ nonce: String, bundleId: String, account: String) async throws(VerificationError) {
        try await ledger.consumeNonce(nonce, bundleId: bundleId, account: account, now: now(), by: request)
    }

    func keepReceipt(_ receipt: String, bundleId: String, chains: [String]) async {
        guard let sealer else { return }
        for chain in chains {
            let binding = Array("\(bundleId)\0\(chain)".utf8)
            do {
                let sealed = try sealer.seal(Array(receipt.utf8), associatedData: binding)
                try await ledger.storeLatestReceipt(bundleId: bundleId, originalTransactionId: chain, sealedReceipt: Data(sealed))
            } catch {
                // The grant stands (Apple said yes); only later re-verification of this chain is lost.
                metrics?.recordLostWrite("latest_receipt")
                logger.error("latest_receipt_not_kept", ["bundleId": bundleId, "code": error.code.rawValue])
            }
        }
    }
}
