import AppleTrust
import Foundation
import IAPCore

/// Checks an App Store Server API bearer token as Apple documents it: ES256 JWT, header
/// `{alg: ES256, kid, typ: JWT}`, claims `iss`, `iat`, `exp` (at most 60 minutes after `iat`, not
/// past), `aud: appstoreconnect-v1`, `bid`, signed with the key registered for that app.
enum ServerAPIAuth {
    static func authenticate(_ authorization: String?, store: SimulatorStore, nowSeconds: Int64) -> SimulatedApp? {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return nil }
        let token = String(authorization.dropFirst("Bearer ".count))
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerBytes = try? Base64URL.decode(String(parts[0])),
              let claimBytes = try? Base64URL.decode(String(parts[1])),
              let signature = try? Base64URL.decode(String(parts[2])),
              let header = try? StrictJSON().parse(headerBytes).objectValue,
              let claims = try? StrictJSON().parse(claimBytes).objectValue else { return nil }
        guard header["alg"] == .string("ES256"), header["typ"] == .string("JWT"),
              case .string(let kid)? = header["kid"], let app = store.app(keyId: kid) else { return nil }
        guard claims["iss"] == .string(app.issuerId), claims["aud"] == .string(AppStoreServerAPIToken.audience),
              claims["bid"] == .string(app.bundleId),
              case .int(let iat)? = claims["iat"], case .int(let exp)? = claims["exp"] else { return nil }
        guard iat <= nowSeconds + 60, exp > nowSeconds, exp > iat, exp - iat <= 3600 else { return nil }
        let signingInput = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard app.apiPublicKey.verifyES256(signature: Array(signature), message: signingInput) else { return nil }
        return app
    }
}
