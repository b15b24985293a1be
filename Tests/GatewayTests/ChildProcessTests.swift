import CommandLineSupport
import Foundation
import XCTest

/// The helper programs the benchmarks start (`openssl speed`, the Python peer): spawned from a
/// thread that blocks every signal, as Swift's task pool and Dispatch threads do, the child still
/// starts with none blocked or ignored, and it never outlives its deadline.
final class ChildProcessTests: XCTestCase {
    /// Runs `body` on a fresh thread with every signal blocked and returns what it returned.
    private func onSignalBlockingThread(_ body: @escaping @Sendable () throws -> String) throws -> String {
        final class Outcome: @unchecked Sendable { var result: Result<String, any Error>? }
        let outcome = Outcome()
        let finished = expectation(description: "the spawning thread finished")
        let thread = Thread {
            var all = sigset_t()
            sigfillset(&all)
            pthread_sigmask(SIG_BLOCK, &all, nil)
            outcome.result = Result { try body() }
            finished.fulfill()
        }
        thread.start()
        wait(for: [finished], timeout: 60)
        return try XCTUnwrap(outcome.result).get()
    }

    func testAChildStartsWithNoSignalBlockedOrIgnored() throws {
        // The executables ignore SIGPIPE (prepareStandardDescriptors); their children must not inherit that.
        let before = signal(SIGPIPE, SIG_IGN)
        defer { signal(SIGPIPE, before) }
        let status = try onSignalBlockingThread {
            try ChildProcess.run("/bin/grep", ["-E", "^Sig(Blk|Ign):", "/proc/self/status"], deadline: .seconds(10))
        }
        // Hex bit masks, bit n-1 for signal n; 32 and 33 are glibc's own (its spawn leaves them ignored).
        let masks = Dictionary(uniqueKeysWithValues: status.split(separator: "\n").map { line in
            let parts = line.split(separator: "\t")
            return (String(parts[0]), UInt64(parts[1], radix: 16) ?? .max)
        })
        XCTAssertEqual(masks["SigBlk:"], 0, status)
        XCTAssertEqual(try XCTUnwrap(masks["SigIgn:"]) & 0x7FFF_FFFF, 0, "no standard signal ignored: \(status)")
    }

    /// The hang of `Benchmarks/run.sh` (issue 14): `openssl speed -seconds 1` ends on its SIGALRM.
    func testOpensslSpeedEndsOnItsAlarmWhenSpawnedFromASignalBlockingThread() throws {
        let output = try onSignalBlockingThread {
            try ChildProcess.run("/usr/bin/env", ["openssl", "speed", "-seconds", "1", "ecdsap256"], deadline: .seconds(30))
        }
        XCTAssertTrue(output.contains("ecdsa (nistp256)"), output)
    }

    func testAChildStillRunningAtItsDeadlineIsKilledAndReported() throws {
        let started = ContinuousClock.now
        XCTAssertThrowsError(try ChildProcess.run("/bin/sleep", ["30"], deadline: .seconds(1))) { error in
            XCTAssertTrue("\(error)".contains("deadline"), "\(error)")
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(10), "killed at its deadline, not waited for")
    }

    func testAFailingChildIsAnError() throws {
        XCTAssertThrowsError(try ChildProcess.run("/bin/sh", ["-c", "exit 3"], deadline: .seconds(10))) { error in
            XCTAssertTrue("\(error)".contains("exited with 3"), "\(error)")
        }
        XCTAssertEqual(try ChildProcess.run("/bin/sh", ["-c", "echo hello"], deadline: .seconds(10)), "hello\n")
    }
}
