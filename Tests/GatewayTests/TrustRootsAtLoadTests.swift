import Foundation
import TestSupport
import XCTest

/// An app's trust-root files are read when the gateway starts (off the pool), never by a request:
/// the gateway keeps verifying with the roots it loaded even once the files are gone.
final class TrustRootsAtLoadTests: XCTestCase {
    func testRequestsVerifyWithTheRootsLoadedAtStartWithoutReadingTheirFiles() async throws {
        let gw = try await GatewayE2E.start(self)
        // JWS and receipt roots alike (the demo app pins one file for both).
        try FileManager.default.removeItem(at: gw.harness.directory.appendingPathComponent("trust/simulator-root.cer"))

        let signed = try gw.buy(owner: "device-ada")
        let bySignedTransaction = try await gw.verifySigned(signed.signedTransaction, account: "ada")
        XCTAssertEqual(bySignedTransaction.status, 200, bySignedTransaction.text)
        XCTAssertEqual(bySignedTransaction.json["verdict"]?.stringValue, "granted", bySignedTransaction.text)

        _ = try gw.buy(GatewayE2E.removeAds, owner: "device-bea")
        let byReceipt = try await gw.verifyReceipt(try gw.simulator.receipt(owner: "device-bea", bundleId: gw.bundleId),
                                                   account: "bea")
        XCTAssertEqual(byReceipt.status, 200, byReceipt.text)
        XCTAssertEqual(byReceipt.json["verdict"]?.stringValue, "granted", byReceipt.text)
    }
}
