import AppleTrust
import Foundation
import HTTPServer
import IAPConfig
import IAPCore

/// Checks an app backend's `Authorization: Bearer KEY` against the app's configured key, in
/// constant time: both sides are hashed with SHA-256 and the digests compared without early exit,
/// so neither the key's length nor its prefix leaks through timing.
struct APIKeyAuthenticator: Sendable {
    let environment: [String: String]

    func authenticate(_ request: HTTPRequest, app: AppPolicy) throws(VerificationError) {
        guard let presented = Self.bearerToken(request.headers["Authorization"]) else {
            throw VerificationError(.unauthenticated, "an Authorization: Bearer API key is required")
        }
        let expectedDigest: [UInt8]
        switch app.apiKey {
        case .sha256(let hex):
            guard let bytes = Hex.bytes(hex), bytes.count == 32 else {
                throw VerificationError(.invalidConfiguration, "\(app.bundleId): apiKey.sha256 is not 64 hex digits")
            }
            expectedDigest = bytes
        case .secret(let reference):
            expectedDigest = SHA256Digest.hash(Array(try reference.resolve(environment: environment).utf8))
        }
        guard Self.constantTimeEqual(SHA256Digest.hash(Array(presented.utf8)), expectedDigest) else {
            throw VerificationError(.unauthenticated, "the API key is not valid for \(app.bundleId)")
        }
    }

    /// The credentials of `Bearer <token>`; the scheme is case-insensitive (RFC 9110 §11.1), as
    /// is the space count before the token. Nil for another scheme or an empty token.
    static func bearerToken(_ header: String?) -> String? {
        guard let header, let space = header.firstIndex(of: " "), header[..<space].lowercased() == "bearer" else {
            return nil
        }
        let token = header[space...].drop { $0 == " " }
        return token.isEmpty ? nil : String(token)
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<a.count { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}
