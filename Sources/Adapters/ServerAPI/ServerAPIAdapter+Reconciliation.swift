import AppleTrust
import Foundation
import IAPConfig
import IAPCore

/// What reconciliation needs from the adapter: the app's Server API client, and a status item of
/// Get All Subscription Statuses verified against the app's pinned roots and normalised.
extension ServerAPIAdapter: ReconciliationSource {
    /// The app's client; INVALID_CONFIGURATION when the app has no Server API credentials.
    public func client(for app: AppPolicy) throws(VerificationError) -> AppStoreServerAPIClient {
        try context(for: app).client.get()
    }

    /// Verifies both JWS of one `lastTransactions` item (bundle, app id, environment, chain) and
    /// normalises them. The item's own `originalTransactionId` must be the transaction's.
    public func verifiedStatus(_ item: LastTransactionsItem, app: AppPolicy)
        async throws(VerificationError) -> (transaction: CanonicalTransaction, renewal: CanonicalRenewal?) {
        let context = try context(for: app)
        let signedTransaction = item.signedTransactionInfo
        let transaction = try await context.verifier.verifying { verifier throws(VerificationError) in
            try verifier.verifyAndDecodeTransaction(signedTransaction)
        }
        let canonical = try normalizer.normalize(transaction: transaction.raw)
        guard (canonical.originalTransactionId ?? canonical.transactionId) == item.originalTransactionId else {
            throw VerificationError(.notificationInconsistent, "a status item's transaction belongs to another chain")
        }
        var renewal: CanonicalRenewal?
        if let jws = item.signedRenewalInfo {
            let decoded = try await context.verifier.verifying { verifier throws(VerificationError) in
                try verifier.verifyAndDecodeRenewalInfo(jws)
            }
            let normalized = try normalizer.normalize(renewalInfo: decoded.raw)
            guard normalized.originalTransactionId == item.originalTransactionId else {
                throw VerificationError(.notificationInconsistent, "a status item's renewal info belongs to another chain")
            }
            guard normalized.environment == canonical.environment else {
                throw VerificationError(.environmentNotAllowed, "a status item's payloads disagree on the environment")
            }
            renewal = normalized
        }
        return (canonical, renewal)
    }
}
