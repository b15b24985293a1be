import IAPCore

/// The access half of `EntitlementAccess` that an app's policy decides: here, beside the policy it
/// reads, so the model (IAPCore) needs no configuration type.
extension EntitlementAccess {
    /// Whether a state grants access under the app's policy (grace and billing retry as it says).
    public static func grantsAccess(_ state: Entitlement.State, policy: AppPolicy.GracePeriodPolicy) -> Bool {
        switch state {
        case .active: true
        case .gracePeriod: policy.grantDuringGracePeriod
        case .billingRetry: policy.grantDuringBillingRetry
        case .expired, .revoked, .refunded, .credited: false
        }
    }
}
