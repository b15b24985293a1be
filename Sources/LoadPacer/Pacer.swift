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

        /// How many requests the run makes: one due every 1 / rate s for `seconds`.
        public var requests: Int { Int(rate * seconds) }
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
        /// t0 on CLOCK_MONOTONIC (ns), to line the records up with a trace of the server (`perf trace -p`).
        public var t0MonotonicNanoseconds: Int64 = 0
        public var records: [Record]
        public var connectFailures = 0
        public var firstProtocolError: String?
    }

    public static func run(_ target: LoopbackTarget, request: [UInt8], options: Options) -> Run {
        run(target, options: options) { _ in request }
    }

    /// Each request its own body: request i sends line i of `bodies` (0-based), so none is sent
    /// twice. A run that needs more requests than the file has lines is refused before it starts:
    /// it would have to send some body again (a re-claim where a new grant was meant).
    public static func run(_ target: LoopbackTarget, head: LoopbackTarget.Head, bodies: BodiesFile, options: Options) throws(BodiesFile.Refused) -> Run {
        guard options.requests <= bodies.count else {
            throw BodiesFile.Refused(reason: "the run makes \(options.requests) requests but the bodies file has \(bodies.count) lines (one per request, none sent twice)")
        }
        return run(target, options: options) { head.request(body: bodies.body($0)) }
    }

    /// `request(i)` is called once, when request i is sent.
    private static func run(_ target: LoopbackTarget, options: Options, request: @escaping (Int) -> [UInt8]) -> Run {
        precondition(options.rate > 0 && options.connections > 0 && options.seconds > 0)
        let engine = Engine(target, request: request, options: options)
        engine.loop()
        return engine.run
    }
}

/// The run loop: one thread, level-triggered epoll over the connections, woken at the next due
/// time (nanoseconds, epoll_pwait2) or by a response. Free connections wait in a queue, so the one
/// free longest takes the next request (its wait is what a late send measures).
private final class Engine {
    var run: Pacer.Run
    let request: (Int) -> [UInt8]
    let total: Int
    let timeout: Int64
    let hardEnd: Int64
    let slots: [Slot]
    var free: [Int] = []
    var next = 0
    var outstanding = 0
    let t0: Int64
    let epoll: Int32
    /// How often timeouts and reconnections are looked at (a timeout is late by at most this).
    static let housekeeping: Int64 = 5_000_000

    init(_ target: LoopbackTarget, request: @escaping (Int) -> [UInt8], options: Pacer.Options) {
        self.request = request
        total = options.requests
        timeout = Int64(options.timeoutSeconds * 1e9)
        hardEnd = Int64(options.seconds * 1e9) + timeout + 1_000_000_000
        run = Pacer.Run(options: options, records: (0..<total).map { Pacer.Record(due: Int64((Double($0) * 1e9 / options.rate).rounded())) })
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        precondition(epoll >= 0, "epoll_create1 failed")
        slots = (0..<options.connections).map { _ in Slot(target, maxBodyBytes: options.maxResponseBytes) }
        t0 = monotonicNanoseconds()
        run.t0MonotonicNanoseconds = t0
        for index in slots.indices { connect(index, at: 0) }
    }

    deinit {
        for slot in slots { slot.close() }
        Glibc.close(epoll)
    }

    func now() -> Int64 { monotonicNanoseconds() - t0 }

    func connect(_ index: Int, at time: Int64) {
        let slot = slots[index]
        guard slot.connect(at: time) else {
            run.connectFailures += 1
            return
        }
        watch(index, writable: false, operation: EPOLL_CTL_ADD)
        free.append(index)
    }

    func watch(_ index: Int, writable: Bool, operation: Int32) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | (writable ? EPOLLOUT.rawValue : 0)
        event.data.u32 = UInt32(index)
        epoll_ctl(epoll, operation, slots[index].fd, &event)
    }

    func finish(_ index: Int, at time: Int64, status: Int = 0, failure: Pacer.Failure? = nil) {
        let slot = slots[index]
        guard let request = slot.current else { return }
        run.records[request].done = time
        run.records[request].status = status
        run.records[request].failure = failure
        slot.current = nil
        slot.freeSince = time
        outstanding -= 1
        if slot.fd >= 0 { free.append(index) }
    }

    /// Closes the connection (failing what it carried) and opens another.
    func drop(_ index: Int, at time: Int64, failure: Pacer.Failure) {
        finish(index, at: time, failure: failure)
        slots[index].close()
        free.removeAll { $0 == index }
        connect(index, at: time)
    }

    func write(_ index: Int, at time: Int64) {
        let slot = slots[index]
        guard slot.writePending() else { return drop(index, at: time, failure: .closed) }
        // Writability is watched only while a request is partly written (rare: the socket buffer was full).
        let pending = slot.written < slot.request.count
        if pending != slot.watchesWritable {
            watch(index, writable: pending, operation: EPOLL_CTL_MOD)
            slot.watchesWritable = pending
        }
    }

    func housekeep(at time: Int64) {
        for index in slots.indices {
            let slot = slots[index]
            if let request = slot.current, time - run.records[request].sent > timeout { drop(index, at: time, failure: .timeout) }
            if slot.fd < 0, slot.retryAt <= time { connect(index, at: time) }
        }
    }

    func loop() {
        var events = [epoll_event](repeating: epoll_event(), count: slots.count)
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var nextHousekeeping: Int64 = 0
        while true {
            var time = now()
            if time >= nextHousekeeping {
                housekeep(at: time)
                nextHousekeeping = time + Self.housekeeping
            }
            while next < total, run.records[next].due <= time, !free.isEmpty {
                let index = free.removeFirst()
                let slot = slots[index]
                run.records[next].lag = time - max(run.records[next].due, slot.freeSince)
                run.records[next].sent = time
                slot.current = next
                slot.request = request(next)
                slot.written = 0
                next += 1
                outstanding += 1
                write(index, at: time)
                time = now()
            }
            if next == total && outstanding == 0 { break }
            if time > hardEnd {
                for index in slots.indices { finish(index, at: time, failure: .timeout) }
                for i in next..<total { run.records[i].failure = .notSent }
                break
            }
            var wake = min(hardEnd, nextHousekeeping)
            if next < total, !free.isEmpty { wake = min(wake, run.records[next].due) }
            let span = max(0, wake - time)
            var wait = timespec(tv_sec: Int(span / 1_000_000_000), tv_nsec: Int(span % 1_000_000_000))
            let ready = epoll_pwait2(epoll, &events, Int32(events.count), &wait, nil)
            guard ready > 0 else { continue }
            for k in 0..<Int(ready) {
                let event = events[k]
                let index = Int(event.data.u32)
                guard slots[index].fd >= 0 else { continue }
                if event.events & EPOLLOUT.rawValue != 0, slots[index].current != nil { write(index, at: now()) }
                if event.events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 { read(index, into: &buffer) }
            }
        }
    }

    func read(_ index: Int, into buffer: inout [UInt8]) {
        let slot = slots[index]
        while slot.fd >= 0 {
            let n = buffer.withUnsafeMutableBytes { recv(slot.fd, $0.baseAddress, $0.count, 0) }
            let at = now()
            if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
            if n <= 0 {
                // Closed (or reset): an error only if a request was waiting on it.
                return drop(index, at: at, failure: .closed)
            }
            do {
                let responses = try buffer.withUnsafeBytes { try slot.reader.consume(UnsafeRawBufferPointer(start: $0.baseAddress, count: n)) }
                var closes = false
                for response in responses {
                    guard slot.current != nil else { throw HTTPResponseReader.ReadError.malformed("a response to no request") }
                    finish(index, at: at, status: response.status)
                    closes = closes || response.closesConnection
                }
                if closes {
                    slot.close()
                    free.removeAll { $0 == index }
                    connect(index, at: at)
                }
            } catch {
                run.firstProtocolError = run.firstProtocolError ?? "\(error)"
                drop(index, at: at, failure: .badResponse)
            }
        }
    }
}

/// One kept-alive connection and the request it carries.
private final class Slot {
    let target: LoopbackTarget
    let maxBodyBytes: Int
    var fd: Int32 = -1
    var reader: HTTPResponseReader
    var current: Int?
    /// The bytes of `current`.
    var request: [UInt8] = []
    var written = 0
    var watchesWritable = false
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
        watchesWritable = false
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
    func writePending() -> Bool {
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
