import IAPCore
import Ledger

/// What the gateway's routes are handed: one of each endpoint, built by the service from its parts.
struct GatewayEndpoints: Sendable {
    let readiness: ReadinessEndpoint
    let metrics: MetricsEndpoint
    /// The OpenAPI document, its verify request built from the registered adapters' evidence forms.
    let openAPI: String
    let nonces: NoncesEndpoint
    let verify: VerifyEndpoint
    let entitlements: EntitlementsEndpoint
    let offerSignatures: OfferSignaturesEndpoint
    let history: HistoryEndpoint
    let orders: OrderLookupEndpoint
    let notifications: NotificationsEndpoint
    let retention: RetentionEndpoint
    /// Where the comparison routes read from; nil: they answer 404.
    let comparisons: (any ComparisonLedger)?
    /// Receipt rollouts (GET …/rollout, the dashboard's rollout section); nil: that route answers 404.
    let rollouts: RolloutController?

    func comparisonLedger() throws(VerificationError) -> any ComparisonLedger {
        guard let comparisons else { throw VerificationError(.notFound, "comparisons are not enabled") }
        return comparisons
    }
}
