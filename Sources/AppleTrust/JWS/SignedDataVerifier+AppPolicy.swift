import Foundation
import IAPConfig
import IAPCore

extension SignedDataVerifier {
    /// The verifier an app's policy describes: its pinned JWS roots, bundle id, app Apple id,
    /// every environment one of its claims may come from, online checks, and local test data only where the policy enables it.
    /// (`AppVerifiers` keeps one per app for the gateway.)
    public convenience init(policy: AppPolicy, ocspTransport: any OCSPTransport = UpstreamOCSPTransport(),
                            maxInputBytes: Int = SignedDataVerifier.defaultMaxInputBytes,
                            now: @escaping @Sendable () -> Date = { Date() }) throws(VerificationError) {
        try self.init(rootCertificates: try AppVerifiers.loadRoots(policy.trustRoots.jws, app: policy, what: "trustRoots.jws"),
                      bundleId: policy.bundleId, appAppleId: policy.appAppleId,
                      environments: policy.acceptableEnvironments, enableOnlineChecks: policy.onlineChecks,
                      allowLocalTestEnvironments: policy.allowLocalTestEnvironments, now: now, ocspTransport: ocspTransport,
                      maxInputBytes: maxInputBytes)
    }
}
