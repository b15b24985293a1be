import XCTest

@testable import IAPCore
@testable import Ledger

/// The deadline watcher expires answered calls' deadlines in batches (one wake-up per
/// `deadlineTolerance`), not with a thread switch per call.
final class DeadlineWakeupTests: XCTestCase {
    func testAnsweredCallsDeadlinesCostOneWakeUpPerToleranceNotOnePerCall() async throws {
        let executor = StorageExecutor(limits: .init(threads: 1, deadline: .milliseconds(300)))
        let first = ContinuousClock.now
        for i in 0..<100 {
            let value = try await executor.run { i }
            XCTAssertEqual(value, i)
            try await Task.sleep(for: .milliseconds(1))
        }
        let span = ContinuousClock.now - first
        // Every deadline passes (300 ms after its call), each late by at most the tolerance.
        try await Task.sleep(for: .milliseconds(300) + StorageExecutor.deadlineTolerance + .milliseconds(200))
        let wakeups = executor.deadlineWakeups
        // Each call's deadline 1 ms or more after the last: one wake-up each without the tolerance
        // (10 ms); with it, one per 10 ms of the calls' span, give or take.
        let bound = Int(span / .milliseconds(10)) + 5
        XCTAssertLessThanOrEqual(wakeups, bound, "\(wakeups) wake-ups for 100 deadlines over \(span)")
        XCTAssertLessThan(bound, 100, "the calls were too slow for the check to mean anything (\(span))")
    }
}
