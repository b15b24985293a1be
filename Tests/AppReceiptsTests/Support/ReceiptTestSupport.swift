import Foundation
import IAPCore
import TestPKI
import XCTest
@testable import AppReceipts

/// The code `body` is refused with (nil when it succeeds or throws something else).
func code(_ body: () throws -> Void) -> VerificationError.Code? {
    do { try body(); return nil } catch { return (error as? VerificationError)?.code }
}

/// Apple's real production receipt (../shared/testdata/apple-real/), as DER.
func productionDER() throws -> [UInt8] {
    try StrictBase64.decode(AppleRealVectors.text(AppleRealVectors.receiptProduction))
}

/// The production receipt with one letter of its bundle id changed: still well-formed DER, so it
/// parses, but its signature no longer verifies.
func tamperedBundleIdDER() throws -> [UInt8] {
    var der = try productionDER()
    let needle = Array("org.getpure.pure-iphone".utf8)
    let at = try XCTUnwrap((0...(der.count - needle.count)).first { Array(der[$0..<($0 + needle.count)]) == needle })
    der[at] = UInt8(ascii: "x")
    return der
}
