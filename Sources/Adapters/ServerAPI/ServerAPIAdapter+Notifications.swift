import AppleTrust
import IAPConfig
import IAPCore

/// V2 notifications are Server API evidence: signed by the same chain, about the same records, so
/// they are verified by the app's one verifier and normalised with this adapter's mapping.
extension ServerAPIAdapter: SignedNotificationDecoding {
    public func decodeSignedNotification(_ signedPayload: String, app: AppPolicy) throws(VerificationError)
        -> VerifiedNotification {
        let payload = try verifiers.verifier(for: app).verifyAndDecodeNotification(signedPayload)
        let transaction = try payload.verifiedTransaction.map { (t) throws(VerificationError) in
            try normalizer.normalize(transaction: t.raw)
        }
        let renewal = try payload.verifiedRenewalInfo.map { (r) throws(VerificationError) in
            try normalizer.normalize(renewalInfo: r.raw)
        }
        return VerifiedNotification(payload: payload, transaction: transaction, renewal: renewal)
    }
}

/// Finish Transaction (API 1.20) with the app's Server API client.
extension ServerAPIAdapter: TransactionFinishing {
    public func finishTransaction(_ transactionId: String, environment: AppStoreEnvironment, app: AppPolicy)
        async throws(VerificationError) {
        try await client(for: app).finishTransaction(transactionId: transactionId,
                                                     environment: environment == .sandbox ? .sandbox : .production)
    }
}
