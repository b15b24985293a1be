import Foundation
import IAPCore

extension SignedDataVerifier {
    /// The verifier an app's policy describes: its pinned JWS roots, bundle id, app Apple id,
    /// every environment one of its claims may come from, online checks, and local test data only
    /// where the policy enables it.
    public convenience init(policy: AppPolicy, ocspTransport: any OCSPTransport = URLSessionOCSPTransport(),
                            maxInputBytes: Int = SignedDataVerifier.defaultMaxInputBytes) throws(VerificationError) {
        var roots: [Data] = []
        for url in policy.trustRoots.jws {
            guard let der = FileManager.default.contents(atPath: url.path) else {
                throw VerificationError(.invalidConfiguration, "\(policy.bundleId): cannot read JWS trust root \(url.path)")
            }
            roots.append(der)
        }
        try self.init(rootCertificates: roots, bundleId: policy.bundleId, appAppleId: policy.appAppleId,
                      environments: policy.acceptableEnvironments, enableOnlineChecks: policy.onlineChecks,
                      allowLocalTestEnvironments: policy.allowLocalTestEnvironments, ocspTransport: ocspTransport,
                      maxInputBytes: maxInputBytes)
    }
}
