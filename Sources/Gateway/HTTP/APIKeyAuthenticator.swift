import AppleTrust
import Foundation
import HTTPServer
import IAPCore

/// Checks an app backend's `Authorization: Bearer KEY` against the app's configured key, in
/// constant time: both sides are hashed with SHA-256 and the digests compared without early exit,
/// so neither the key's length nor its prefix leaks through timing.
struct APIKeyAuthenticator: Sendable {
    let environment: [String: String]

    func authenticate(_ request: HTTPRequest, app: AppPolicy) throws(VerificationError) {
        guard let header = request.headers["Authorization"], header.hasPrefix("Bearer "),
              case let presented = String(header.dropFirst("Bearer ".count)), !presented.isEmpty else {
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

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<a.count { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}
