import AppStoreSimulator
import Foundation
@testable import Gateway
import IAPCore
import Ledger
import TestSupport
import XCTest

/// Access against the clock has one judge (`EntitlementAccess`): the reconciler re-verifying a
/// stored receipt dates an expiry as past exactly when the entitlement read already says expired,
/// at the edge of the clock-skew allowance as anywhere else.
final class ReconcilerClockTests: XCTestCase {
    func testAReceiptsExpiryIsPastForTheReconcilerExactlyWhenTheEntitlementReadSaysExpired() async throws {
        let gw = try await GatewayE2E.start(self)
        let (apps, claimed) = try await gw.legacyOnlySubscriber(owner: "device-uma", account: "uma")
        let bought = try XCTUnwrap(claimed.json["transactions"]?.arrayValue?.first)
        let chain = try XCTUnwrap(bought["originalTransactionId"]?.stringValue)
        let purchased = try XCTUnwrap(bought["purchaseDate"]?.intValue)
        let expires = try XCTUnwrap(bought["expiresDate"]?.intValue)
        let stored = try XCTUnwrap(try gw.harness.parts.storedLedger.entitlements(bundleId: gw.bundleId, account: "uma").first)
        // Just outside the allowance, then just inside it: the read says active, then expired.
        let before = expires - EntitlementAccess.clockSkewAllowanceMillis - 1
        let inside = expires - EntitlementAccess.clockSkewAllowanceMillis / 2
        XCTAssertEqual(EntitlementAccess.current(stored, now: before).state, .active)
        XCTAssertEqual(EntitlementAccess.current(stored, now: inside).state, .expired)

        var dated: [Int64] = []
        for now in [before, inside] {
            var parts = gw.harness.parts
            parts.now = { now }
            let report = try await runPass(try parts.reconciler(apps: apps))
            XCTAssertEqual(report.failures, [])
            XCTAssertEqual(report.receiptsReverified, 1)
            let entries = try gw.harness.parts.storedLedger.inboxEntries(bundleId: gw.bundleId, since: 0, limit: 100)
            let reconciled = entries.filter { $0.id.hasPrefix("reconcile:\(chain):") && $0.receivedAt == now }
            XCTAssertEqual(reconciled.count, 1, "\(entries.map(\.id))")
            dated += reconciled.map(\.signedDate)
        }

        XCTAssertEqual(dated, [purchased, expires], "dated by its purchase while active, by its expiry once expired")
    }
}
