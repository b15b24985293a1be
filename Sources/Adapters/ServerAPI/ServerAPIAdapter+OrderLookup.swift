import AppleTrust
import IAPConfig
import IAPCore

extension ServerAPIAdapter: OrderLookingUp {
    /// Look Up Order ID in each environment the policy accepts, Production first. Apple answers an
    /// order it does not know with `status` 1 (a 200, not a 404), so the next environment is asked
    /// on that answer rather than on the client's not-found fallback.
    public func lookUpOrder(_ orderId: String, app: AppPolicy, policy: any EvidencePolicy) async throws(VerificationError)
        -> AdapterOutcome {
        let context = try context(for: app)
        let client = try context.client.get()
        for environment in try Self.order(policy, app: app).environments {
            let answer = try await client.lookUpOrderId(orderId, order: .only(environment))
            switch answer.status {
            case 0: break
            case 1: continue
            default:
                throw VerificationError(.upstreamInvalidResponse,
                                        "App Store Server API lookUpOrderId: status \(answer.status) is neither 0 nor 1")
            }
            var collected = Collected()
            for jws in answer.signedTransactions {
                let payload = try await verifiedTransaction(jws, answeredBy: answer.environment, context)
                let transaction = try normalizer.normalize(transaction: payload.raw)
                try policy.admit(EvidenceIdentity(bundleId: transaction.bundleId, appAppleId: transaction.appAppleId,
                                                  environment: transaction.environment, kind: .transaction))
                try collected.add(transaction)
            }
            // A valid order always lists its purchases; one that lists none names nothing to show.
            guard let found = collected.environment else { continue }
            return AdapterOutcome(adapter: id, environment: found, transactions: collected.sortedTransactions,
                                  mappingVersion: mappingVersion)
        }
        throw VerificationError(.orderNotFound, "the App Store knows no order with this id for \(app.bundleId)")
    }
}
