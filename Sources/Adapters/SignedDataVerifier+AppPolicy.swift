import AppleTrust
import Foundation
import IAPConfig
import IAPCore

extension SignedDataVerifier {
    /// The verifier an app's policy describes: its pinned JWS roots, online checks, and its identity
    /// for Apple's own messages (`AppPolicy.identity(for: .apple)`: every environment one of its
    /// claims may come from, local test data only where the policy enables it). A claim's narrower
    /// identity is applied after it by the claim policy, which knows the account.
    /// (`AppVerifiers` keeps one per app for the gateway.)
    public convenience init(policy: AppPolicy, ocspTransport: any OCSPTransport = UpstreamOCSPTransport(),
                            maxInputBytes: Int = SignedDataVerifier.defaultMaxInputBytes,
                            now: @escaping @Sendable () -> Date = { Date() }) throws(VerificationError) {
        try self.init(rootCertificates: try AppVerifiers.loadRoots(policy.trustRoots.jws, app: policy, what: "trustRoots.jws"),
                      identity: policy.identity(for: .apple), enableOnlineChecks: policy.onlineChecks, now: now,
                      ocspTransport: ocspTransport, maxInputBytes: maxInputBytes)
    }
}
