import AppStoreSimulator
import Foundation
import IAPCore
import XCTest

/// One JWS verifier and chain cache per app: what the Server API adapter verified, notifications
/// about the same app find already verified (the same chain is built and checked once).
final class OneVerifierPerAppTests: XCTestCase {
    func testANotificationSignedWithTheChainAVerifyAlreadyCheckedIsAChainCacheHit() async throws {
        let e2e = try await NotificationE2E.start(self)
        let purchase = try e2e.subscribe(owner: "device-ann")
        let verified = try await e2e.gw.verifySigned(purchase.signedTransaction, account: "ann")
        XCTAssertEqual(verified.status, 200, verified.text)
        let afterVerify = try await e2e.gw.get("/metrics")
        XCTAssertTrue(afterVerify.text.contains("iapgw_chain_cache_lookups_total{result=\"miss\"} 1\n"), afterVerify.text)

        try await e2e.deliver("DID_RENEW", about: purchase)

        let metrics = try await e2e.gw.get("/metrics")
        XCTAssertTrue(metrics.text.contains("iapgw_chain_cache_lookups_total{result=\"miss\"} 1\n"),
                      "the notification's outer and inner JWS reuse the chain the verify checked: \(metrics.text)")
        XCTAssertFalse(metrics.text.contains("iapgw_chain_cache_lookups_total{result=\"hit\"} 0\n"), metrics.text)
    }
}
