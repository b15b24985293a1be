import IAPCore

/// How a stored transaction takes in facts that arrive later for the same transactionId.
enum TransactionFacts {
    /// The record to keep. Apple's `signedDate` orders facts when both records carry one: stale
    /// evidence (an old receipt replayed after a refund) never overwrites newer facts. A revocation
    /// is never lost to evidence that cannot prove it was reversed — only a newer signed record
    /// without a revocation (Apple's REFUND_REVERSED) clears it.
    static func merge(stored: CanonicalTransaction, incoming: CanonicalTransaction) -> CanonicalTransaction {
        if let storedSigned = stored.signedDate, let incomingSigned = incoming.signedDate {
            if incomingSigned >= storedSigned { return incoming }
            var kept = stored
            if kept.revocationDate == nil, incoming.revocationDate != nil {
                kept.revocationDate = incoming.revocationDate
                kept.revocationReason = incoming.revocationReason
            }
            return kept
        }
        var merged = incoming
        if merged.revocationDate == nil, stored.revocationDate != nil {
            merged.revocationDate = stored.revocationDate
            merged.revocationReason = stored.revocationReason
        }
        return merged
    }
}
