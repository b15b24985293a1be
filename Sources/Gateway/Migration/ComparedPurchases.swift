import Adapters
import IAPConfig
import IAPCore

extension PurchaseComparison {
    /// Adds who, where and what each path would grant per purchase chain: the account, the
    /// environment the paths answered in, and per chain the entitlement each path derives (with the
    /// gateway's own derivation, so "what a cutover changes" is what the gateway would answer).
    mutating func describePurchases(legacy: Result<AdapterOutcome, VerificationError>,
                                    serverAPI: Result<AdapterOutcome, VerificationError>,
                                    account: String, app: AppPolicy) {
        self.account = account.isEmpty ? nil : account
        let answered = [legacy, serverAPI].compactMap { try? $0.get() }
        environment = answered.first?.environment.rawValue
        appVersion = answered.compactMap { $0.appTransaction?.applicationVersion }.first
        func entitlements(_ result: Result<AdapterOutcome, VerificationError>) -> [String: Entitlement] {
            guard case .success(let o) = result else { return [:] }
            let list = EntitlementCalculator.entitlements(account: account, transactions: o.transactions,
                                                          renewals: o.renewals, catalog: app.productCatalog, now: comparedAt)
            return Dictionary(list.map { ($0.originalTransactionId, $0) }, uniquingKeysWith: { a, _ in a })
        }
        let left = entitlements(legacy), right = entitlements(serverAPI)
        let transactions = answered.flatMap(\.transactions)
        var chainOf: [String: String] = [:]
        var typeOf: [String: String] = [:]
        for t in transactions {
            let chain = t.originalTransactionId ?? t.transactionId
            chainOf[t.transactionId] = chain
            if let type = t.type?.rawValue { typeOf[chain] = type }
        }
        // A renewal difference names the chain itself; a transaction difference names its transaction.
        let differing = Set(differences.map { chainOf[$0.transactionId] ?? $0.transactionId })
        let bothAnswered = legacyError == nil && serverAPIError == nil
        purchases = Set(left.keys).union(right.keys).sorted().map { chain in
            let l = left[chain], r = right[chain]
            let productId = l?.productId ?? r?.productId ?? ""
            return ComparedPurchase(
                originalTransactionId: chain, productId: productId,
                productType: typeOf[chain] ?? app.productCatalog[productId]?.type.rawValue,
                legacyState: l?.state, legacyExpiresDate: l?.expiresDate,
                serverAPIState: r?.state, serverAPIExpiresDate: r?.expiresDate,
                agreed: bothAnswered && !differing.contains(chain))
        }
    }
}
