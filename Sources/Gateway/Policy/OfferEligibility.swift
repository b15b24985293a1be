import IAPConfig
import IAPCore

/// What the gateway knows of an account that decides which offers it may get: its entitlements in
/// one subscription group, judged at one time. The one owner of the audience rules of
/// `AppPolicy.OfferAudience` (Config/README, `promotionalOffers`).
struct OfferEligibility {
    /// The account's entitlements in the group, as they stand at the time of the question.
    let inGroup: [Entitlement]
    /// Some purchase of the account (any product of the app) stands refunded or revoked.
    let hasRefund: Bool
    let grantsAccessNow: Bool
    /// A transaction of the account, for Apple's `transactionId` claim: one in the group if any.
    let transactionId: String?

    init(entitlements: [Entitlement], group: Set<String>, policy: AppPolicy, now: Int64) {
        let current = entitlements.map { EntitlementAccess.current($0, now: now) }
        inGroup = current.filter { group.contains($0.productId) }
        hasRefund = current.contains { $0.state.isTakenBack }
        grantsAccessNow = inGroup.contains { EntitlementAccess.grantsAccess($0.state, policy: policy.gracePeriodPolicy) }
        transactionId = (inGroup.first ?? current.first)?.originalTransactionId
    }

    /// Throws `OFFER_NOT_ALLOWED` unless the account is in `audience`.
    func require(_ audience: AppPolicy.OfferAudience) throws(VerificationError) {
        switch audience {
        case .anyone:
            return
        case .subscribers:
            guard grantsAccessNow else { throw refusal("the offer is for current subscribers of its group") }
        case .winBack:
            guard !inGroup.isEmpty, !grantsAccessNow else {
                throw refusal("the offer is for accounts whose subscription in its group has ended")
            }
            guard !hasRefund else { throw refusal("the offer is not for an account with a refunded or revoked purchase") }
        }
    }

    /// An introductory offer may be allowed only to an account that never held the group and has
    /// no refund; withholding one (`false`) is always allowed.
    func requireIntroductoryOffer(allowed: Bool) throws(VerificationError) {
        guard allowed else { return }
        guard inGroup.isEmpty else { throw refusal("an introductory offer is for accounts that never subscribed to the product") }
        guard !hasRefund else { throw refusal("an introductory offer is not for an account with a refunded or revoked purchase") }
    }

    private func refusal(_ reason: String) -> VerificationError { VerificationError(.offerNotAllowed, reason) }
}
