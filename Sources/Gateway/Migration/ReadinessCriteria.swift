import IAPConfig
import IAPCore

/// What the cutover verdict is judged against: the app's readiness thresholds, the product types
/// of its catalog (each must be covered), the environment whose verdict is the app's, and the grace
/// policy that decides which states grant access (for the cutover impact).
public struct ReadinessCriteria: Sendable, Equatable {
    public var thresholds: AppPolicy.Readiness
    public var productTypes: Set<String>
    /// Production when the app allows it, else Sandbox; the other environment is judged apart.
    public var primaryEnvironment: String
    public var gracePeriodPolicy: AppPolicy.GracePeriodPolicy

    public init(thresholds: AppPolicy.Readiness = .standard, productTypes: Set<String>, primaryEnvironment: String,
                gracePeriodPolicy: AppPolicy.GracePeriodPolicy) {
        self.thresholds = thresholds
        self.productTypes = productTypes
        self.primaryEnvironment = primaryEnvironment
        self.gracePeriodPolicy = gracePeriodPolicy
    }

    public init(app: AppPolicy) {
        self.init(thresholds: app.readiness, productTypes: Set(app.productCatalog.values.map(\.type.rawValue)),
                  primaryEnvironment: app.identity(for: .apple).primaryEnvironment.rawValue,
                  gracePeriodPolicy: app.gracePeriodPolicy)
    }
}
