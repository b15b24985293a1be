import Foundation
import IAPCore

/// RFC 7519's registered claims in a payload Apple signed. Apple never puts `exp`, `nbf`, `aud`,
/// `iat`, `sub` or `jti` into its signed data, but Apple's Python library decodes every payload with
/// PyJWT, which enforces them when present; this verifier is never more permissive than that:
///
/// - `exp`, `nbf`, `iat` must be JSON numbers (PyJWT: "must be an integer"; a JSON `null` is refused
///   too); `exp` at or before now is expired, `nbf` or `iat` after now is not yet valid. No leeway,
///   as PyJWT's default; NumericDates are seconds, truncated toward zero as PyJWT's `int()` does.
/// - `aud` of any value is refused: PyJWT refuses an audience the caller did not ask for, and
///   nobody asks for one here (PyJWT lets an empty one through; this is stricter).
/// - `sub` and `jti`, when present, must be strings (PyJWT's type checks). `iss` is not checked by
///   PyJWT without an expected issuer, nor here.
///
/// Checked only after the signature verified (nothing a payload says is acted on before), for every
/// kind of payload and every inner JWS of a notification: they all pass `verifiedPayload`.
enum RegisteredClaims {
    /// Every claim name checked below (a claim checked but not listed here would be skipped).
    static let names = ["exp", "nbf", "iat", "aud", "sub", "jti"]
    private static let nameLengths = names.map(\.utf8.count).min()!...names.map(\.utf8.count).max()!

    static func check(_ payload: JSONValue, nowMs: Int64) throws(VerificationError) {
        guard let claims = payload.objectValue else { return }
        // Apple's payloads have no key as short as these names, so one pass over the key lengths
        // (no hashing) settles the usual case; any key of such a length sends the payload through
        // every check below, in their order.
        guard claims.keys.contains(where: { nameLengths.contains($0.utf8.count) }) else { return }
        if let exp = try numericDateMs("exp", claims), exp <= nowMs {
            throw VerificationError(.jwtExpired, "payload.exp \(exp / 1000) is not after now (\(nowMs / 1000))")
        }
        for name in ["nbf", "iat"] {
            if let date = try numericDateMs(name, claims), date > nowMs {
                throw VerificationError(.jwtNotYetValid, "payload.\(name) \(date / 1000) is later than now (\(nowMs / 1000))")
            }
        }
        if claims["aud"] != nil {
            throw VerificationError(.jwtAudienceNotAccepted, "payload names an audience (aud); Apple's signed data never does")
        }
        for name in ["sub", "jti"] {
            if let value = claims[name], value.stringValue == nil {
                throw VerificationError(.invalidFieldType, "payload.\(name) must be a string, found \(value.typeName)")
            }
        }
    }

    /// A NumericDate claim (seconds, truncated toward zero) in milliseconds, nil when absent. Clamped
    /// to ±`PayloadDates.maxMs` like every other payload date, so no arithmetic on it can trap.
    private static func numericDateMs(_ name: String, _ claims: [String: JSONValue]) throws(VerificationError) -> Int64? {
        let seconds: Double
        switch claims[name] {
        case nil: return nil
        case .int(let i)?: seconds = Double(i)
        case .double(let d)?: seconds = d.rounded(.towardZero)
        case let other?: throw VerificationError(.invalidFieldType, "payload.\(name) must be a number, found \(other.typeName)")
        }
        let bound = Double(PayloadDates.maxMs)
        return Int64(min(max(seconds * 1000, -bound), bound))
    }
}
