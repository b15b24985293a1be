import Foundation
import IAPCore

extension SignedDataVerifier {
    /// The verifier an app's policy describes: its pinned JWS roots, bundle id, app Apple id,
    /// environments, online checks, and local test data only where the policy enables it.
    /// (`AppVerifiers` keeps one per app for the gateway.)
    public convenience init(policy: AppPolicy, ocspTransport: any OCSPTransport = URLSessionOCSPTransport(),
                            maxInputBytes: Int = SignedDataVerifier.defaultMaxInputBytes,
                            now: @escaping @Sendable () -> Date = { Date() }) throws(VerificationError) {
        var environments = policy.allowedEnvironments
        if policy.allowLocalTestEnvironments { environments.formUnion([.xcode, .localTesting]) }
        try self.init(rootCertificates: try AppVerifiers.loadRoots(policy.trustRoots.jws, app: policy, what: "trustRoots.jws"),
                      bundleId: policy.bundleId, appAppleId: policy.appAppleId,
                      environments: environments, enableOnlineChecks: policy.onlineChecks,
                      allowLocalTestEnvironments: policy.allowLocalTestEnvironments, now: now, ocspTransport: ocspTransport,
                      maxInputBytes: maxInputBytes)
    }
}
