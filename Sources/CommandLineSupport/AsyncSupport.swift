import Dispatch
import Foundation

/// Runs an async body from the synchronous CLI entry point and returns its result.
public func runAsync<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let semaphore = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var result: Result<T, any Error>!
    Task {
        do { result = .success(try await body()) } catch { result = .failure(error) }
        semaphore.signal()
    }
    semaphore.wait()
    return try result.get()
}

/// Waits until SIGTERM or SIGINT arrives (the signals are handled, not fatal, while waiting).
public func waitForTerminationSignal() async -> Int32 {
    await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
        let queue = DispatchQueue(label: "iapgw.signals")
        nonisolated(unsafe) var sources: [DispatchSourceSignal] = []
        nonisolated(unsafe) var resumed = false
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler {
                guard !resumed else { return }
                resumed = true
                sources.forEach { $0.cancel() }
                continuation.resume(returning: sig)
            }
            source.resume()
            sources.append(source)
        }
    }
}
