import Foundation
import IAPCore
import XCTest
@testable import Ledger

/// The ledger side of "entitlements follow the clock": stored entitlements whose period ended with
/// no new fact are moved to the state `EntitlementAccess` gives them, each with its webhook event
/// queued once (one key per chain and transition), on both engines.
final class ClockSweepTests: LedgerTestCase {
    let app = "com.example.app"
    let expires: Int64 = 1_700_100_000_000
    let skew = EntitlementAccess.clockSkewAllowanceMillis

    private func claimed(_ ledger: SQLLedger, account: String, chain: String, state: Entitlement.State = .active,
                         periodEnd: Int64?, now: Int64 = 1_700_000_000_000) throws {
        _ = try ledger.claim(claim(account, [transaction(chain)], entitlements: [
            Entitlement(account: account, productId: "com.example.pro", state: state, expiresDate: periodEnd,
                        originalTransactionId: chain, source: "serverAPI"),
        ], now: now))
    }

    private func stateOf(_ ledger: SQLLedger, _ account: String) throws -> Entitlement.State? {
        try ledger.entitlements(bundleId: app, account: account).first?.state
    }

    func testAnEntitlementPastItsPeriodIsMovedOnceWithOneEventAndOthersAreLeftAlone() throws {
        let ledger = try openLedger()
        try claimed(ledger, account: "ann", chain: "100", periodEnd: expires)
        try claimed(ledger, account: "ben", chain: "200", periodEnd: expires + 3_600_000)
        try claimed(ledger, account: "cat", chain: "300", periodEnd: nil)
        try claimed(ledger, account: "dan", chain: "400", state: .gracePeriod, periodEnd: expires)
        try claimed(ledger, account: "eve", chain: "500", state: .billingRetry, periodEnd: expires)

        XCTAssertEqual(try ledger.advanceEntitlementsByClock(now: expires - skew - 1, limit: 100), 0,
                       "before the skew allowance nothing has ended")
        XCTAssertEqual(try ledger.outboxDepth(), 0)

        let now = expires - skew
        XCTAssertEqual(try ledger.advanceEntitlementsByClock(now: now, limit: 100), 2)
        XCTAssertEqual(try stateOf(ledger, "ann"), .expired)
        XCTAssertEqual(try stateOf(ledger, "dan"), .billingRetry, "a grace period ends in billing retry")
        XCTAssertEqual(try stateOf(ledger, "ben"), .active)
        XCTAssertEqual(try stateOf(ledger, "cat"), .active)
        XCTAssertEqual(try stateOf(ledger, "eve"), .billingRetry)

        let events = try ledger.dueWebhooks(now: now, limit: 10).map(\.event)
        XCTAssertEqual(Set(events), [
            try XCTUnwrap(EntitlementAccess.periodEnded(bundleId: app, originalTransactionId: "100", productId: "com.example.pro",
                                                        recorded: .active, periodEnd: expires, now: now)),
            try XCTUnwrap(EntitlementAccess.periodEnded(bundleId: app, originalTransactionId: "400", productId: "com.example.pro",
                                                        recorded: .gracePeriod, periodEnd: expires, now: now)),
        ])
        XCTAssertEqual(try ledger.advanceEntitlementsByClock(now: now + 60_000, limit: 100), 0, "a second sweep moves nothing")
        XCTAssertEqual(try ledger.outboxDepth(), 2)
    }

    func testAnEndAlreadyAnnouncedIsNotQueuedAgainWhenAnOlderFactRestoresTheRow() throws {
        let ledger = try openLedger()
        try claimed(ledger, account: "ann", chain: "100", periodEnd: expires)
        XCTAssertEqual(try ledger.advanceEntitlementsByClock(now: expires + skew + 1, limit: 100), 1)
        // The same facts written again (a re-verify of the same evidence, a second instance's sweep
        // reading the row before the first moved it): the row moves again, the event is the same one.
        try claimed(ledger, account: "ann", chain: "100", periodEnd: expires, now: 1_700_000_000_001)
        XCTAssertEqual(try stateOf(ledger, "ann"), .active)
        XCTAssertEqual(try ledger.advanceEntitlementsByClock(now: expires + skew + 2, limit: 100), 1)
        XCTAssertEqual(try stateOf(ledger, "ann"), .expired)
        XCTAssertEqual(try ledger.outboxDepth(), 1)
    }

    func testARenewalBeforeTheSweepLeavesNothingToEnd() throws {
        let ledger = try openLedger()
        try claimed(ledger, account: "ann", chain: "100", periodEnd: expires)
        try claimed(ledger, account: "ann", chain: "100", periodEnd: expires + 30 * 86_400_000, now: 1_700_000_000_001)
        XCTAssertEqual(try ledger.advanceEntitlementsByClock(now: expires + skew + 1, limit: 100), 0)
        XCTAssertEqual(try stateOf(ledger, "ann"), .active)
        XCTAssertEqual(try ledger.outboxDepth(), 0)
    }

    func testASweepMovesAtMostItsLimitAndTheNextCallTakesTheRest() throws {
        let ledger = try openLedger()
        for i in 0..<5 { try claimed(ledger, account: "acct\(i)", chain: "10\(i)", periodEnd: expires + Int64(i)) }
        let now = expires + skew + 100
        XCTAssertEqual(try ledger.advanceEntitlementsByClock(now: now, limit: 3), 3)
        XCTAssertEqual(try ledger.advanceEntitlementsByClock(now: now, limit: 3), 2)
        XCTAssertEqual(try ledger.advanceEntitlementsByClock(now: now, limit: 3), 0)
        XCTAssertEqual(try ledger.outboxDepth(), 5)
    }
}
