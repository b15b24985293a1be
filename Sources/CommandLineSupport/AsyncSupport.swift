import Dispatch
import Foundation

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
