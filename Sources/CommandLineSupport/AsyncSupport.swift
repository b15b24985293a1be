import Dispatch
import Foundation
import Synchronization

/// SIGTERM and SIGINT, handled (not fatal) from the moment this is made: made before a server
/// starts listening, so a signal sent as soon as it answers is never the default, fatal one.
public final class TerminationSignals: Sendable {
    private struct State {
        var received: Int32?
        var waiter: CheckedContinuation<Int32, Never>?
    }

    /// Shared with the signal handlers, which are made before `self` is.
    private final class Shared: Sendable {
        let state = Mutex(State())
    }

    private let shared = Shared()
    /// Set once in `init`, cancelled in `deinit`: never touched concurrently.
    nonisolated(unsafe) private let sources: [any DispatchSourceSignal]

    public init() {
        let queue = DispatchQueue(label: "iapgw.signals")
        var sources: [any DispatchSourceSignal] = []
        let shared = shared
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler {
                let waiter = shared.state.withLock { state -> CheckedContinuation<Int32, Never>? in
                    guard state.received == nil else { return nil }
                    state.received = sig
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume(returning: sig)
            }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    deinit { sources.forEach { $0.cancel() } }

    /// The first signal received since this was made (at once if one was).
    public func wait() async -> Int32 {
        await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            let received = shared.state.withLock { state -> Int32? in
                if state.received == nil { state.waiter = continuation }
                return state.received
            }
            if let received { continuation.resume(returning: received) }
        }
    }
}

/// Waits until SIGTERM or SIGINT arrives (the signals are handled, not fatal, while waiting).
public func waitForTerminationSignal() async -> Int32 {
    let signals = TerminationSignals()
    let received = await signals.wait()
    withExtendedLifetime(signals) {}
    return received
}
