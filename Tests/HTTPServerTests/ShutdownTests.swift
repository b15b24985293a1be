@testable import HTTPServer
import Foundation
import Synchronization
import XCTest

/// Shutting down holds no thread of Swift's cooperative pool: the grace period ends when the last
/// request completes (not at a polling tick or the deadline), and stopping the daemon, which joins
/// libmicrohttpd's threads, runs on a thread of its own.
final class ShutdownTests: HTTPServerTestCase {
    func testGracePeriodEndsWhenTheLastRequestCompletes() async throws {
        let gate = AsyncGate()
        let server = try startedServer(HTTPServerConfiguration(port: 0)) { _ in
            await gate.passed()
            return .json(200, "{\"done\":true}")
        }
        let port = server.port
        let pending = Task { await onThreadOfItsOwn { Result { try RawConnection.request(port: port, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n") } } }
        let started = await eventually { server.inFlight == 1 }
        XCTAssertTrue(started, "the request did not reach the handler")

        // An hour of grace: only the request's completion can end it within the test.
        let finished = Atomic<Bool>(false)
        let shutdown = Task {
            await server.shutdown(gracePeriod: .seconds(3600))
            finished.store(true, ordering: .sequentiallyConsistent)
        }
        let refusing = await eventually { (try? RawConnection(port: port)) == nil }
        XCTAssertTrue(refusing, "the listening socket stayed open")
        XCTAssertFalse(finished.load(ordering: .sequentiallyConsistent), "shutdown ended with a request in flight")

        gate.open()
        let response = try await pending.value.get()
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.bodyText, "{\"done\":true}")
        let ended = await eventually { finished.load(ordering: .sequentiallyConsistent) }
        XCTAssertTrue(ended, "shutdown outlived the last request")
        if !ended { shutdown.cancel() }
    }

    func testStoppingWaitsForLibmicrohttpdsThreadsOffThePool() async throws {
        // Handlers that block libmicrohttpd's thread before their first suspension (what no handler
        // may do) keep the daemon's threads from ending, so stopping waits for them.
        let gate = DispatchSemaphore(value: 0)
        let count = 2 * ProcessInfo.processInfo.activeProcessorCount + 1
        var servers: [HTTPServer] = []
        for _ in 0..<count {
            servers.append(try startedServer(HTTPServerConfiguration(port: 0, threads: 1)) { _ in
                blockUntilOpen(gate)
                return .json(200, "{}")
            })
        }
        let requests = servers.map { server in
            let port = server.port
            return Task {
                await onThreadOfItsOwn {
                    _ = try? RawConnection.request(port: port, "POST /v HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
                }
            }
        }
        let blocked = await eventually { servers.allSatisfy { $0.inFlight == 1 } }
        XCTAssertTrue(blocked, "the handlers did not all start")
        // Should the stops hold the pool, the gate opens after 20 s from a thread of its own, so the
        // test fails instead of hanging.
        let released = Atomic<Bool>(false)
        DispatchQueue.global().asyncAfter(deadline: .now() + 20) {
            released.store(true, ordering: .sequentiallyConsistent)
            gate.signal()
        }

        let shutdowns = servers.map { server in Task { await server.shutdown(gracePeriod: .zero) } }
        let stopping = await eventually { servers.allSatisfy { $0.core.lifecycle.withLock { $0.daemon == nil } } }
        XCTAssertTrue(stopping, "not every server began stopping")
        let ranMeanwhile = await Task.detached { !released.load(ordering: .sequentiallyConsistent) }.value

        gate.signal()
        for shutdown in shutdowns { await shutdown.value }
        for request in requests { await request.value }
        XCTAssertTrue(ranMeanwhile, "other async work waited for the daemons to stop")
        XCTAssertEqual(servers.map(\.inFlight), Array(repeating: 0, count: count))
    }

    /// Polls `condition` until it holds or 30 s pass.
    private func eventually(_ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return true
    }
}

/// Runs `body` (blocking socket calls) on a new thread, so the test itself holds no pool thread.
private func onThreadOfItsOwn<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}

/// Blocks the calling thread until `gate` opens, then leaves it open for the next.
private func blockUntilOpen(_ gate: DispatchSemaphore) {
    gate.wait()
    gate.signal()
}

/// Suspends its waiters (holding no thread) until opened.
private final class AsyncGate: Sendable {
    private struct State {
        var open = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    func passed() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        waiters.forEach { $0.resume() }
    }
}
