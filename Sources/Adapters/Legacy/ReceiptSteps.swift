import IAPConfig
import IAPCore

/// A receipt's nonce is spent before Apple is asked, by whichever adapter: a nonce buys one
/// attempt, whatever its outcome, so a replay race cannot win twice. Without one, the receipt is
/// refused where the app requires nonces.
public struct ReceiptNonceCheckIn: EvidenceCheckIn {
    public init() {}
    public func beforeVerifying(_ evidence: PurchaseEvidence, account: String, app: AppPolicy,
                                store: any EvidenceStore) async throws(VerificationError) {
        if let nonce = evidence.nonce {
            try await store.consumeNonce(nonce, bundleId: app.bundleId, account: account)
        } else if app.noncePolicy.requiredForReceipts {
            throw VerificationError(.nonceRequired, "\(app.bundleId) requires a nonce with every receipt")
        }
    }
}

/// The newest receipt verifyReceipt returned, kept sealed per purchase chain of the outcome so
/// apps that stay on verifyReceipt can be re-verified later.
public struct KeepLatestReceipt: ClaimFollowUp {
    public let receipt: String
    public init(receipt: String) { self.receipt = receipt }
    public func afterClaim(_ outcome: AdapterOutcome, bundleId: String, store: any EvidenceStore) async {
        let chains = Set(outcome.transactions.map { $0.originalTransactionId ?? $0.transactionId })
        await store.keepReceipt(receipt, bundleId: bundleId, chains: chains.sorted())
    }
}

extension EvidenceForm {
    public static let receipt = Self(kind: .receipt, member: "receipt", companions: ["nonce"],
                                     summary: "base64 PKCS#7 app receipt, with the nonce the gateway issued for it",
                                     checkIn: ReceiptNonceCheckIn())
}
