import Adapters
@testable import Gateway
import IAPConfig
import IAPCore

extension VerificationAdapter {
    /// An account's claim, decided by the gateway's own rules (`ClaimPolicy`): what `POST …/verify` runs.
    func verify(_ evidence: PurchaseEvidence, account: String, for app: AppPolicy) async throws(VerificationError)
        -> AdapterOutcome {
        try await verify(evidence, for: app, policy: ClaimPolicy(app: app, claimant: .account(account)))
    }
}
