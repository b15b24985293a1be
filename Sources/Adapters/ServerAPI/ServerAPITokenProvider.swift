import AppleTrust
import Foundation
import IAPConfig
import IAPCore
import Synchronization

/// Where the client gets its bearer token. `keyId` and `issuerId` are public identifiers, used to
/// name the key in errors when Apple rejects it; the key itself never leaves the provider.
public protocol ServerAPITokenProviding: Sendable {
    var keyId: String { get }
    var issuerId: String { get }
    func bearerToken() throws(VerificationError) -> String
}

extension AppStoreServerAPIToken: ServerAPITokenProviding {
    public func bearerToken() throws(VerificationError) -> String { try token() }
}

/// Signs tokens with an app's `.p8` key, read from its `SecretReference` the first time a token is
/// needed (a gateway whose apps never use the Server API must start without the key present).
/// After that the signer is kept, and reuses each token until shortly before it expires.
public final class LazyServerAPITokenProvider: ServerAPITokenProviding {
    public let keyId: String
    public let issuerId: String
    public let bundleId: String
    private let privateKey: SecretReference
    private let environment: [String: String]
    private let now: @Sendable () -> Date
    private let signer = Mutex<AppStoreServerAPIToken?>(nil)

    public init(credentials: AppPolicy.InAppPurchaseKey, bundleId: String,
                environment: [String: String] = ProcessInfo.processInfo.environment,
                now: @escaping @Sendable () -> Date = { Date() }) {
        self.keyId = credentials.keyId
        self.issuerId = credentials.issuerId
        self.bundleId = bundleId
        self.privateKey = credentials.privateKey
        self.environment = environment
        self.now = now
    }

    public func bearerToken() throws(VerificationError) -> String {
        let result: Result<AppStoreServerAPIToken, VerificationError> = signer.withLock { current in
            if let current { return .success(current) }
            do throws(VerificationError) {
                let made = try makeSigner()
                current = made
                return .success(made)
            } catch {
                return .failure(error)
            }
        }
        return try result.get().token()
    }

    private func makeSigner() throws(VerificationError) -> AppStoreServerAPIToken {
        let pem: String
        do {
            pem = try privateKey.resolve(environment: environment)
        } catch {
            // SecretReference messages name the reference, never the value.
            throw VerificationError(error.code, "\(bundleId): serverAPI.privateKey: \(error.message)")
        }
        do {
            return try AppStoreServerAPIToken(privateKeyPEM: pem, keyId: keyId, issuerId: issuerId, bundleId: bundleId,
                                              now: now)
        } catch {
            // Whatever the key parser said, say only where the key came from.
            throw VerificationError(.invalidConfiguration,
                                    "\(bundleId): serverAPI.privateKey (\(privateKey)) for key id \(keyId) is not a PKCS#8 EC P-256 private key")
        }
    }
}
