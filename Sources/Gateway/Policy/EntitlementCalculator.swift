import IAPConfig
import IAPCore

/// What an account may use now, derived from canonical facts alone (states by `EntitlementAccess`):
/// the same answer whichever adapter produced them. One entitlement per purchase chain
/// (`originalTransactionId`).
public enum EntitlementCalculator {
    /// `catalog`: the app's products, for the type of a transaction whose evidence does not state
    /// one (a legacy receipt names only a subscription's, by its expiry), since a consumable's
    /// entitlement is `credited`, never lasting access.
    public static func entitlements(account: String, transactions: [CanonicalTransaction],
                                    renewals: [CanonicalRenewal], catalog: [String: AppPolicy.Product],
                                    now: Int64) -> [Entitlement] {
        let renewalByChain = Dictionary(renewals.map { ($0.originalTransactionId, $0) }, uniquingKeysWith: { a, _ in a })
        let chains = Dictionary(grouping: transactions) { $0.originalTransactionId ?? $0.transactionId }
        return chains.keys.sorted().compactMap { chain in
            guard var current = currentTransaction(chains[chain]!) else { return nil }
            if current.type == nil { current.type = catalog[current.productId]?.type }
            let renewal = renewalByChain[chain]
            let state = EntitlementAccess.state(of: current, renewal: renewal, now: now)
            return Entitlement(account: account, productId: current.productId, state: state,
                               expiresDate: EntitlementAccess.periodEnd(of: current, renewal: renewal, in: state),
                               originalTransactionId: chain, source: current.source,
                               commitmentExpiresDate: current.commitmentExpiresDate)
        }
    }

    /// The transaction that decides a chain's state: the newest one not superseded by an upgrade
    /// (an upgrade leaves the old transaction with `isUpgraded`, and the new product takes over).
    static func currentTransaction(_ chain: [CanonicalTransaction]) -> CanonicalTransaction? {
        let live = chain.filter { $0.isUpgraded != true }
        return (live.isEmpty ? chain : live).max { a, b in
            (a.purchaseDate ?? 0, a.expiresDate ?? 0, a.transactionId) < (b.purchaseDate ?? 0, b.expiresDate ?? 0, b.transactionId)
        }
    }
}
