import Foundation
import IAPCore
import Synchronization

/// Signs the bearer tokens the App Store Server API wants: ES256 with the `.p8` key, header
/// `{alg, kid, typ}`, claims `{iss, iat, exp, aud: "appstoreconnect-v1", bid}`. A token is reused
/// until `refreshMargin` before it expires (signing on every request wastes an ECDSA sign).
public final class AppStoreServerAPIToken: Sendable {
    /// Apple refuses tokens that live longer than an hour.
    public static let maxLifetime: TimeInterval = 3600
    public static let audience = "appstoreconnect-v1"

    public let keyId: String
    public let issuerId: String
    public let bundleId: String
    public let lifetime: TimeInterval
    public let refreshMargin: TimeInterval
    private let key: ECPrivateKey
    private let now: @Sendable () -> Date
    private let current = Mutex<(token: String, expires: Date)?>(nil)

    public init(privateKeyPEM: String, keyId: String, issuerId: String, bundleId: String,
                lifetime: TimeInterval = 1800, refreshMargin: TimeInterval = 60,
                now: @escaping @Sendable () -> Date = { Date() }) throws(VerificationError) {
        guard lifetime > 0, lifetime <= Self.maxLifetime else {
            throw VerificationError(.invalidConfiguration, "token lifetime must be within (0, 60 min]")
        }
        guard refreshMargin >= 0, refreshMargin < lifetime else {
            throw VerificationError(.invalidConfiguration, "refresh margin must be shorter than the lifetime")
        }
        self.key = try ECPrivateKey(pkcs8PEM: privateKeyPEM)
        self.keyId = keyId
        self.issuerId = issuerId
        self.bundleId = bundleId
        self.lifetime = lifetime
        self.refreshMargin = refreshMargin
        self.now = now
    }

    /// A valid token: the cached one while it has more than `refreshMargin` left, else a new one.
    public func token() throws(VerificationError) -> String {
        let at = now()
        let result: Result<String, VerificationError> = current.withLock { cur in
            if let cur, cur.expires.timeIntervalSince(at) > refreshMargin { return .success(cur.token) }
            do throws(VerificationError) {
                // Clamped: a clock reading of NaN or year 300000 must not trap the process.
                let issued = PayloadDates.milliseconds(at) / 1000
                let expires = issued + Int64(lifetime)
                let t = try sign(issuedAt: issued, expiresAt: expires)
                cur = (t, Date(timeIntervalSince1970: TimeInterval(expires)))
                return .success(t)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    private func sign(issuedAt: Int64, expiresAt: Int64) throws(VerificationError) -> String {
        let header: JSONValue = .object(["alg": .string("ES256"), "kid": .string(keyId), "typ": .string("JWT")])
        let claims: JSONValue = .object([
            "iss": .string(issuerId), "iat": .int(issuedAt), "exp": .int(expiresAt),
            "aud": .string(Self.audience), "bid": .string(bundleId),
        ])
        let input = Base64URL.encode(Array(header.jsonText.utf8)) + "." + Base64URL.encode(Array(claims.jsonText.utf8))
        let signature = try key.signES256(Array(input.utf8))
        return input + "." + Base64URL.encode(signature)
    }
}
