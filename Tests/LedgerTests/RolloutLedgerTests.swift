import Foundation
import IAPCore
import XCTest
@testable import Ledger

/// An app's rollout state as every instance of one ledger shares it: changed only against the
/// state it was judged on, each change recorded with its event (and a rollback's webhook) in one
/// transaction, or nothing of it.
final class RolloutLedgerTests: LedgerTestCase {
    private let t0: Int64 = 1_700_000_000_000
    private let app = "com.example.app"

    private func state(_ percent: Int, revision: Int64, at: Int64) -> RolloutState {
        RolloutState(bundleId: app, step: percent == 0 ? -1 : 0, percent: percent, stepStartedAt: at, paused: false,
                     revision: revision)
    }

    private func event(_ from: Int, _ to: Int, at: Int64, _ action: RolloutEvent.Action = .advanced) -> RolloutEvent {
        RolloutEvent(at: at, action: action, actor: .operator, fromPercent: from, toPercent: to, reason: "test",
                     purchases: ["b", "a"])
    }

    func testTwoChangesJudgedOnTheSameStateMakeOneAndTheOtherIsToldSo() throws {
        let ledger = try openLedger()
        XCTAssertNil(try ledger.rolloutState(bundleId: app))
        XCTAssertTrue(try ledger.changeRollout(expected: nil, next: state(5, revision: 1, at: t0), event: event(0, 5, at: t0),
                                               webhooks: []))
        XCTAssertFalse(try ledger.changeRollout(expected: nil, next: state(5, revision: 1, at: t0 + 1),
                                                event: event(0, 5, at: t0 + 1), webhooks: []),
                       "a second first change (another instance's) finds the state moved")
        let stored = try XCTUnwrap(try ledger.rolloutState(bundleId: app))
        XCTAssertEqual(stored, state(5, revision: 1, at: t0))

        XCTAssertTrue(try ledger.changeRollout(expected: stored, next: state(50, revision: 2, at: t0 + 2),
                                               event: event(5, 50, at: t0 + 2), webhooks: []))
        XCTAssertFalse(try ledger.changeRollout(expected: stored, next: state(0, revision: 2, at: t0 + 3),
                                                event: event(5, 0, at: t0 + 3, .rolledBack), webhooks: []),
                       "a change judged on revision 1 is refused once revision 2 is stored")
        XCTAssertEqual(try ledger.rolloutState(bundleId: app)?.percent, 50)
        let events = try ledger.rolloutEvents(bundleId: app, limit: 10)
        XCTAssertEqual(events.map(\.toPercent), [50, 5], "newest first, the refused changes not recorded")
        XCTAssertEqual(events.first?.purchases, ["a", "b"])
    }

    func testARollbacksWebhookIsQueuedWithItsChangeOrNotAtAll() throws {
        let ledger = SQLLedger(database: try openLedger().database, webhookAudience: .everyApp)
        let notice = RolloutNotice(fromPercent: 5, toPercent: 0, reason: "lost access", purchases: ["p1"])
        let webhook = WebhookEvent.rolloutRolledBack(bundleId: app, key: "rollout:1", at: t0, notice)
        XCTAssertTrue(try ledger.changeRollout(expected: nil, next: state(0, revision: 1, at: t0),
                                               event: event(5, 0, at: t0, .rolledBack), webhooks: [webhook]))
        XCTAssertFalse(try ledger.changeRollout(expected: nil, next: state(0, revision: 1, at: t0 + 1),
                                                event: event(5, 0, at: t0 + 1, .rolledBack),
                                                webhooks: [WebhookEvent.rolloutRolledBack(bundleId: app, key: "rollout:1b",
                                                                                           at: t0 + 1, notice)]))
        let due = try ledger.dueWebhooks(now: t0 + 10, limit: 10)
        XCTAssertEqual(due.map(\.event.idempotencyKey), ["rollout:1"], "the refused change queued nothing")
        XCTAssertEqual(due.first?.event.kind, .rolloutRolledBack)
        XCTAssertEqual(due.first?.event.rollout, notice)
    }
}
