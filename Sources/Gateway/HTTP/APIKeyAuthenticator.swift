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
            guard let bytes = Self.bytes(fromHex: hex), bytes.count == 32 else {
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

    static func bytes(fromHex hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var i = 0
        while i < digits.count {
            guard let hi = nibble(digits[i]), let lo = nibble(digits[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
