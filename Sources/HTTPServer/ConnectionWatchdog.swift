import Dispatch
import Foundation
import Synchronization

/// One accepted connection, as far as the read deadline is concerned.
///
/// libmicrohttpd's own timeout only measures inactivity, so a client sending one byte every few
/// hundred milliseconds would hold a connection forever. The deadline here covers the whole
/// request: it starts when the connection opens (or the previous response completes) and is
/// cleared once the request has been read and handed to the handler.
final class ConnectionWatch: @unchecked Sendable {
    let fd: Int32
    /// Monotonic nanoseconds; 0 while a handler owns the request.
    let readDeadline: Atomic<UInt64>

    init(fd: Int32, deadline: UInt64) {
        self.fd = fd
        self.readDeadline = Atomic(deadline)
    }
}

final class ConnectionWatchdog: @unchecked Sendable {
    private let connections = Mutex<[ObjectIdentifier: ConnectionWatch]>([:])
    private let timer: DispatchSourceTimer
    let timeoutNanos: UInt64

    init(timeoutSeconds: Int) {
        timeoutNanos = UInt64(max(1, timeoutSeconds)) * 1_000_000_000
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global(qos: .utility))
        let period = min(max(timeoutSeconds * 1000 / 5, 50), 1000)
        timer.schedule(deadline: .now() + .milliseconds(period), repeating: .milliseconds(period))
        timer.setEventHandler { [weak self] in self?.closeOverdue() }
        timer.resume()
    }

    func stop() { timer.cancel() }

    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    func nextDeadline() -> UInt64 { Self.now() + timeoutNanos }

    func opened(_ watch: ConnectionWatch) {
        connections.withLock { $0[ObjectIdentifier(watch)] = watch }
    }

    /// Called from libmicrohttpd's close notification, which comes before it closes the socket:
    /// removing under the same lock `closeOverdue` holds means we never shut down a reused fd.
    func closed(_ watch: ConnectionWatch) {
        _ = connections.withLock { $0.removeValue(forKey: ObjectIdentifier(watch)) }
    }

    private func closeOverdue() {
        let now = Self.now()
        connections.withLock { all in
            for watch in all.values {
                let deadline = watch.readDeadline.load(ordering: .relaxed)
                if deadline != 0 && deadline < now {
                    // The event loop sees end-of-stream and closes the connection itself.
                    watch.readDeadline.store(0, ordering: .relaxed)
                    _ = Foundation.shutdown(watch.fd, Int32(SHUT_RDWR))
                }
            }
        }
    }
}
