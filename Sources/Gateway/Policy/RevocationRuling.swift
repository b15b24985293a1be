import Adapters
import IAPConfig
import IAPCore
import Ledger

/// The one judge of refunds and revocations in a verify, decided once from the verified evidence
/// and handed on to the claim and the answer:
/// - the evidence is refused, 422 `TRANSACTION_REVOKED`, for every kind alike, when the purchase
///   it presents (a transaction id, a signed transaction; even with the rest of its chain beside
///   it) is refunded or revoked, or when every purchase of a receipt is;
/// - its other refunded or revoked purchases (a receipt that still holds a live one) are answered
///   as `revoked`, never granted nor finished: a backend that credits per newly granted id must not
///   pay out a refund;
/// - inside the claim, a refund or revocation the ledger holds that Apple stated after the evidence
///   (a notification signed after a device-signed transaction) refuses the presented purchase the
///   same way: an old signed transaction replayed after its refund grants nothing.
struct RevocationRuling: Sendable {
    /// The evidence's refunded or revoked transactions.
    let revoked: Set<String>
    /// The transaction the client presented, and its chain (nil: a receipt presents none).
    private let presented: (transactionId: String, chain: String)?

    init(_ outcome: AdapterOutcome, evidenceKind: AppPolicy.EvidenceKind) throws(VerificationError) {
        revoked = Set(outcome.transactions.filter { $0.revocationDate != nil }.map(\.transactionId))
        if evidenceKind == .receipt {
            presented = nil
            guard !outcome.transactions.isEmpty, outcome.transactions.allSatisfy({ revoked.contains($0.transactionId) }) else { return }
            throw VerificationError(.transactionRevoked, "every purchase in the receipt was refunded or revoked")
        }
        let t = outcome.presentedTransactionId.flatMap { id in outcome.transactions.first { $0.transactionId == id } }
            ?? (outcome.transactions.count == 1 ? outcome.transactions.first : nil)
        presented = t.map { ($0.transactionId, $0.originalTransactionId ?? $0.transactionId) }
        guard let t, let date = t.revocationDate else { return }
        throw VerificationError(.transactionRevoked, "transaction \(ClientExcerpt.of(t.transactionId)) was revoked at \(date)")
    }

    /// Inside the claim: the presented purchase's chain refunded or revoked by a fact newer than the evidence.
    func refuseIfRevokedSince(_ claimed: ClaimOutcome) throws(VerificationError) {
        guard let presented, let state = claimed.newerFacts[presented.chain], state.isTakenBack else { return }
        throw VerificationError(.transactionRevoked,
                                "transaction \(ClientExcerpt.of(presented.transactionId)) was \(state.rawValue) after this evidence was signed")
    }
}
