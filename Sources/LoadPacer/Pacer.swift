import CPoll
import Glibc

/// An open-loop, evenly paced HTTP/1.1 load generator (wrk2's model): request i is due at
/// t0 + i / rate whatever the server does, goes out on the first free kept-alive connection (at
/// most `connections` outstanding), and its latency runs from its due time, not from when a
/// connection became free, so a server stall shows in every request it delays (coordinated
/// omission corrected). Blocking: call it on a thread of its own, not on Swift's cooperative pool,
/// so the generator's timing is not queued behind other tasks.
public enum Pacer {
    public struct Options: Sendable {
        public var rate: Double
        public var connections: Int
        public var seconds: Double
        public var timeoutSeconds: Double
        public var maxResponseBytes: Int

        public init(rate: Double, connections: Int, seconds: Double, timeoutSeconds: Double = 10, maxResponseBytes: Int = 1 << 20) {
            self.rate = rate
            self.connections = connections
            self.seconds = seconds
            self.timeoutSeconds = timeoutSeconds
            self.maxResponseBytes = maxResponseBytes
        }
    }

    public enum Failure: Sendable, Equatable {
        case timeout
        /// The server closed the connection before the whole response.
        case closed
        /// The response could not be read (see `PaceRun.firstProtocolError`).
        case badResponse
        /// Still waiting for a free connection when the run had to end.
        case notSent
    }

    /// One request: times in nanoseconds from t0 (-1: did not happen).
    public struct Record: Sendable {
        public var due: Int64
        public var sent: Int64 = -1
        public var done: Int64 = -1
        public var status = 0
        public var failure: Failure?
        /// How late the generator itself sent it: from the moment both the request was due and a
        /// connection was free, to the send. A server that holds every connection does not count.
        public var lag: Int64 = 0
    }

    public struct Run: Sendable {
        public var options: Options
        public var records: [Record]
        public var connectFailures = 0
        public var firstProtocolError: String?
    }

    public static func run(_ target: LoopbackTarget, request: [UInt8], options: Options) -> Run {
        precondition(options.rate > 0 && options.connections > 0 && options.seconds > 0)
        let total = Int(options.rate * options.seconds)
        let timeout = Int64(options.timeoutSeconds * 1e9)
        var run = Run(options: options, records: (0..<total).map { Record(due: Int64((Double($0) * 1e9 / options.rate).rounded())) })
        let slots = (0..<options.connections).map { _ in Slot(target, maxBodyBytes: options.maxResponseBytes) }
        let t0 = monotonicNanoseconds()
        func now() -> Int64 { monotonicNanoseconds() - t0 }
        for slot in slots where !slot.connect(at: 0) { run.connectFailures += 1 }
        let hardEnd = Int64(options.seconds * 1e9) + timeout + 1_000_000_000
        var next = 0
        var outstanding = 0

        func finish(_ slot: Slot, at time: Int64, status: Int = 0, failure: Failure? = nil) {
            guard let index = slot.current else { return }
            run.records[index].done = time
            run.records[index].status = status
            run.records[index].failure = failure
            slot.current = nil
            slot.freeSince = time
            outstanding -= 1
        }
        func drop(_ slot: Slot, at time: Int64, failure: Failure) {
            finish(slot, at: time, failure: failure)
            slot.close()
            if !slot.connect(at: time) { run.connectFailures += 1 }
        }
        func write(_ slot: Slot, at time: Int64) {
            if !slot.writePending(request) { drop(slot, at: time, failure: .closed) }
        }

        var pollSet: [pollfd] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            var time = now()
            for slot in slots {
                if let index = slot.current, time - run.records[index].sent > timeout { drop(slot, at: time, failure: .timeout) }
                if slot.fd < 0, slot.retryAt <= time, !slot.connect(at: time) { run.connectFailures += 1 }
            }
            while next < total, run.records[next].due <= time, let slot = freeSlot(slots) {
                run.records[next].lag = time - max(run.records[next].due, slot.freeSince)
                run.records[next].sent = time
                slot.current = next
                slot.written = 0
                next += 1
                outstanding += 1
                write(slot, at: time)
                time = now()
            }
            if next == total && outstanding == 0 { break }
            if time > hardEnd {
                for slot in slots where slot.current != nil { finish(slot, at: time, failure: .timeout) }
                for i in next..<total { run.records[i].failure = .notSent }
                break
            }
            var wake = hardEnd
            if next < total, freeSlot(slots) != nil { wake = min(wake, run.records[next].due) }
            pollSet.removeAll(keepingCapacity: true)
            for slot in slots {
                if let index = slot.current { wake = min(wake, run.records[index].sent + timeout + 1) }
                if slot.fd < 0 { wake = min(wake, slot.retryAt) }
                let wantsWrite = slot.current != nil && slot.written < request.count
                pollSet.append(pollfd(fd: slot.fd, events: Int16(POLLIN) | (wantsWrite ? Int16(POLLOUT) : 0), revents: 0))
            }
            var wait = timespec(tv_sec: 0, tv_nsec: 0)
            let span = max(0, wake - time)
            wait.tv_sec = Int(span / 1_000_000_000)
            wait.tv_nsec = Int(span % 1_000_000_000)
            guard CPoll.ppoll(&pollSet, nfds_t(pollSet.count), &wait, nil) > 0 else { continue }
            for (slot, polled) in zip(slots, pollSet) where polled.fd >= 0 && polled.revents != 0 {
                if polled.revents & Int16(POLLOUT) != 0 && slot.current != nil { write(slot, at: now()) }
                guard polled.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0, slot.fd >= 0 else { continue }
                while slot.fd >= 0 {
                    let n = buffer.withUnsafeMutableBytes { recv(slot.fd, $0.baseAddress, $0.count, 0) }
                    let at = now()
                    if n < 0 && (errno == EAGAIN || errno == EINTR) { break }
                    if n <= 0 {
                        // Closed (or reset): an error only if a request was waiting on it.
                        drop(slot, at: at, failure: .closed)
                        break
                    }
                    do {
                        let responses = try buffer.withUnsafeBytes { try slot.reader.consume(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                        var closes = false
                        for response in responses {
                            guard slot.current != nil else { throw HTTPResponseReader.ReadError.malformed("a response to no request") }
                            finish(slot, at: at, status: response.status)
                            closes = closes || response.closesConnection
                        }
                        if closes {
                            slot.close()
                            if !slot.connect(at: at) { run.connectFailures += 1 }
                        }
                    } catch {
                        run.firstProtocolError = run.firstProtocolError ?? "\(error)"
                        drop(slot, at: at, failure: .badResponse)
                    }
                }
            }
        }
        for slot in slots { slot.close() }
        return run
    }

    /// The free connection that has been free longest (its wait is the one a late send measures).
    private static func freeSlot(_ slots: [Slot]) -> Slot? {
        var best: Slot?
        for slot in slots where slot.fd >= 0 && slot.current == nil {
            if best == nil || slot.freeSince < best!.freeSince { best = slot }
        }
        return best
    }
}

/// One kept-alive connection and the request it carries.
private final class Slot {
    let target: LoopbackTarget
    let maxBodyBytes: Int
    var fd: Int32 = -1
    var reader: HTTPResponseReader
    var current: Int?
    var written = 0
    var freeSince: Int64 = 0
    var retryAt: Int64 = 0

    init(_ target: LoopbackTarget, maxBodyBytes: Int) {
        self.target = target
        self.maxBodyBytes = maxBodyBytes
        reader = HTTPResponseReader(maxBodyBytes: maxBodyBytes)
    }

    /// A blocking connect (loopback: microseconds), then non-blocking with TCP_NODELAY. On failure
    /// the slot retries 10 ms later.
    func connect(at time: Int64) -> Bool {
        reader = HTTPResponseReader(maxBodyBytes: maxBodyBytes)
        freeSince = time
        let domain = target.family == .ipv4 ? AF_INET : AF_INET6
        let socketFD = socket(domain, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard socketFD >= 0 else {
            retryAt = time + 10_000_000
            return false
        }
        var connected: Int32
        if target.family == .ipv4 {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = target.port.bigEndian
            address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socketFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        } else {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = target.port.bigEndian
            address.sin6_addr = in6addr_loopback
            connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socketFD, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        }
        guard connected == 0 else {
            Glibc.close(socketFD)
            retryAt = time + 10_000_000
            return false
        }
        var one: Int32 = 1
        setsockopt(socketFD, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        _ = fcntl(socketFD, F_SETFL, fcntl(socketFD, F_GETFL) | O_NONBLOCK)
        fd = socketFD
        return true
    }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    /// Sends what is left of `request`; false if the connection is gone.
    func writePending(_ request: [UInt8]) -> Bool {
        while written < request.count {
            let n = request.withUnsafeBytes { send(fd, $0.baseAddress! + written, $0.count - written, Int32(MSG_NOSIGNAL)) }
            if n < 0 { return errno == EAGAIN || errno == EINTR }
            written += n
        }
        return true
    }
}

func monotonicNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}
