@testable import Gateway
import IAPCore
import Synchronization
import TestSupport
import XCTest

/// The loop every background worker runs (`repeatUntilCancelled`): a failed pass is logged by its
/// code and the next one still runs; cancelling ends it.
final class BackgroundLoopTests: XCTestCase {
    func testAFailedPassIsLoggedByItsCodeAndTheLoopGoesOnUntilCancelled() async throws {
        let capture = LogCapture()
        let passes = Mutex(0)
        let loop = Task {
            await repeatUntilCancelled(every: .milliseconds(5), logger: capture.logger,
                                       failure: "test_pass_failed") { () throws(VerificationError) in
                let pass = passes.withLock { count in
                    count += 1
                    return count
                }
                if pass == 1 { throw VerificationError(.storageUnavailable, "the storage is down: /var/lib/secret.db") }
            }
        }
        let deadline = ContinuousClock.now + .seconds(5)
        while passes.withLock({ $0 }) < 3, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        loop.cancel()
        await loop.value

        XCTAssertGreaterThanOrEqual(passes.withLock { $0 }, 3, "the passes after the failed one ran")
        let failures = capture.captured.filter { $0.contains("test_pass_failed") }
        XCTAssertEqual(failures.count, 1, "\(capture.captured)")
        XCTAssertTrue(failures[0].contains("STORAGE_UNAVAILABLE"), failures[0])
        XCTAssertFalse(failures[0].contains("secret.db"), "the code only, never the message")
    }
}
