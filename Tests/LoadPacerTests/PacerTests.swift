import Foundation
import Glibc
import Synchronization
import XCTest

@testable import LoadPacer

/// A loopback HTTP/1.1 server on plain sockets (a thread per connection) whose answer to the n-th
/// request it reads (0-based, over all connections) the test chooses.
private final class ScriptedServer: Sendable {
    enum Answer: Sendable {
        case respond(String, delaySeconds: Double = 0)
        case close
        case hang
    }

    let port: UInt16
    private let listener: Int32
    private let received = Mutex(0)
    private let bodies = Mutex<[String]>([])
    private let answer: @Sendable (Int) -> Answer

    init(_ answer: @escaping @Sendable (Int) -> Answer) throws {
        self.answer = answer
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 }
        }
        guard bound, listen(listener, 128) == 0 else { throw POSIXError(.EADDRINUSE) }
        port = UInt16(bigEndian: address.sin_port)
        Thread { [self] in
            while true {
                let fd = accept(listener, nil, nil)
                if fd < 0 { return }
                Thread { self.serve(fd) }.start()
            }
        }.start()
    }

    var requestsRead: Int { received.withLock { $0 } }
    /// The request bodies read, in the order they were read (over all connections).
    var bodiesRead: [String] { bodies.withLock { $0 } }

    func stop() { shutdown(listener, Int32(SHUT_RDWR)) }

    private func serve(_ fd: Int32) {
        defer { close(fd) }
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            // One request: its header section, then Content-Length bytes.
            while pending.firstRange(of: Array("\r\n\r\n".utf8)) == nil {
                let n = recv(fd, &buffer, buffer.count, 0)
                if n <= 0 { return }
                pending += buffer[0..<n]
            }
            let end = pending.firstRange(of: Array("\r\n\r\n".utf8))!.upperBound
            let header = String(decoding: pending[..<end], as: UTF8.self).lowercased()
            let length = header.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
            while pending.count < end + length {
                let n = recv(fd, &buffer, buffer.count, 0)
                if n <= 0 { return }
                pending += buffer[0..<n]
            }
            let body = String(decoding: pending[end..<(end + length)], as: UTF8.self)
            pending.removeFirst(end + length)
            bodies.withLock { $0.append(body) }
            let index = received.withLock { count in
                defer { count += 1 }
                return count
            }
            switch answer(index) {
            case .respond(let text, let delay):
                if delay > 0 { Thread.sleep(forTimeInterval: delay) }
                let bytes = Array(text.utf8)
                guard send(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count else { return }
            case .close:
                return
            case .hang:
                while recv(fd, &buffer, buffer.count, 0) > 0 {}
                return
            }
        }
    }
}

final class PacerTests: XCTestCase {
    private static let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    private func pace(_ server: ScriptedServer, rate: Double, connections: Int, seconds: Double, timeout: Double = 10,
                      maxResponseBytes: Int = 1 << 20) throws -> Pacer.Run {
        let target = try LoopbackTarget(url: "http://127.0.0.1:\(server.port)/verify")
        let request = try target.request(method: "POST", headers: ["Content-Type: application/json"], body: Array("{}".utf8))
        return Pacer.run(target, request: request, options: .init(rate: rate, connections: connections, seconds: seconds,
                                                                  timeoutSeconds: timeout, maxResponseBytes: maxResponseBytes))
    }

    func testEveryRequestIsSentAndAnsweredOnKeptAliveConnections() throws {
        let server = try ScriptedServer { _ in .respond(Self.ok) }
        defer { server.stop() }
        let run = try pace(server, rate: 400, connections: 4, seconds: 0.5)
        let summary = PaceSummary(run, maxLagMs: 1000)
        XCTAssertEqual(summary.requests, 200)
        XCTAssertEqual(server.requestsRead, 200)
        XCTAssertEqual(summary.errors, 0)
        XCTAssertTrue(run.records.allSatisfy { $0.status == 200 && $0.sent >= $0.due && $0.done >= $0.sent })
        // Sent on schedule: never before its due time, and the schedule spans the run evenly.
        XCTAssertEqual(run.records[100].due, 250_000_000)
    }

    /// Coordinated omission: one request stalls 300 ms on the only connection. Measured from its
    /// send, only that request is slow; measured from its due time, as here, every request due
    /// during the stall is late by what it waited, as a client sending at that rate would see.
    func testAServerStallCountsForEveryRequestDueDuringIt() throws {
        let server = try ScriptedServer { $0 == 50 ? .respond(Self.ok, delaySeconds: 0.3) : .respond(Self.ok) }
        defer { server.stop() }
        let run = try pace(server, rate: 500, connections: 1, seconds: 1)
        let summary = PaceSummary(run, maxLagMs: 1000)
        XCTAssertEqual(summary.errors, 0)
        let lateFromDue = run.records.filter { $0.done - $0.due >= 100_000_000 }.count
        let slowFromSend = run.records.filter { $0.done - $0.sent >= 100_000_000 }.count
        // 150 requests fall due during the 300 ms; those due in its first 200 ms wait 100 ms or more.
        XCTAssertGreaterThanOrEqual(lateFromDue, 90)
        XCTAssertLessThan(slowFromSend, 10)
        XCTAssertGreaterThanOrEqual(summary.max, 300)
        XCTAssertGreaterThanOrEqual(summary.p99, 100)
        // Waiting for the busy connection is the server's doing, not the generator's lag.
        XCTAssertLessThan(run.records[60].lag, 50_000_000)
    }

    func testClosedConnectionsTimeoutsAndOversizedResponsesAreCountedAsErrors() throws {
        let big = "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + String(repeating: "x", count: 5000)
        let server = try ScriptedServer { index in
            switch index {
            case 3: .close
            case 5: .hang
            case 7: .respond(big)
            case 9: .respond("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
            default: .respond(Self.ok)
            }
        }
        defer { server.stop() }
        let run = try pace(server, rate: 50, connections: 2, seconds: 0.4, timeout: 0.5, maxResponseBytes: 1000)
        let summary = PaceSummary(run, maxLagMs: 1000)
        XCTAssertEqual(summary.requests, 20)
        XCTAssertEqual(summary.closed, 1)
        XCTAssertEqual(summary.timeouts, 1)
        XCTAssertEqual(summary.badResponses, 1)
        XCTAssertEqual(summary.non2xx, 1)
        XCTAssertEqual(summary.notSent, 0)
        XCTAssertEqual(summary.errors, 4)
        XCTAssertEqual(run.firstProtocolError, "response body of 5000 bytes over the limit of 1000")
        XCTAssertEqual(run.records.filter { $0.status == 200 }.count, 16)
    }

    func testNobodyListeningIsAConnectFailureAndNoRequestIsLost() throws {
        let server = try ScriptedServer { _ in .respond(Self.ok) }
        server.stop()
        Thread.sleep(forTimeInterval: 0.05)
        let run = try pace(server, rate: 20, connections: 1, seconds: 0.1, timeout: 0.2)
        let summary = PaceSummary(run, maxLagMs: 1000)
        XCTAssertGreaterThan(summary.connectFailures, 0)
        XCTAssertEqual(summary.notSent, 2)
        XCTAssertTrue(summary.p99.isNaN)
    }

    private func bodiesFile(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pace-bodies-\(UUID().uuidString)").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    private func pace(_ server: ScriptedServer, bodies path: String, rate: Double, connections: Int, seconds: Double) throws -> Pacer.Run {
        let target = try LoopbackTarget(url: "http://127.0.0.1:\(server.port)/verify")
        let head = try target.head(method: "POST", headers: ["Content-Type: application/json"])
        return try Pacer.run(target, head: head, bodies: try BodiesFile(path: path),
                             options: .init(rate: rate, connections: connections, seconds: seconds))
    }

    /// New grants: request i sends line i, once. On one connection the server reads them in the file's order.
    func testEachRequestSendsItsOwnLineOfTheBodiesFileInOrder() throws {
        let lines = (0..<40).map { "{\"account\":\"acct-\($0)\",\"n\":\"\(String(repeating: "x", count: $0 * 37))\"}" }
        let path = try bodiesFile(lines.joined(separator: "\n") + "\n")
        let server = try ScriptedServer { _ in .respond(Self.ok) }
        defer { server.stop() }
        let run = try pace(server, bodies: path, rate: 200, connections: 1, seconds: 0.2)
        XCTAssertEqual(PaceSummary(run, maxLagMs: 1000).errors, 0)
        XCTAssertEqual(server.bodiesRead, lines)
        // On several connections the order of arrival may vary, but each line still goes exactly once.
        let spread = try ScriptedServer { _ in .respond(Self.ok) }
        defer { spread.stop() }
        _ = try pace(spread, bodies: path, rate: 400, connections: 4, seconds: 0.1)
        XCTAssertEqual(spread.bodiesRead.sorted(), lines.sorted())
    }

    /// A run needing one body more than the file has is refused before anything is sent (it would
    /// send some body twice); one needing exactly the file's lines runs (the last line without its LF).
    func testABodiesFileOfNLinesRefusesARunOfNPlusOneRequests() throws {
        let path = try bodiesFile("{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n{\"a\":4}")
        let server = try ScriptedServer { _ in .respond(Self.ok) }
        defer { server.stop() }
        XCTAssertThrowsError(try pace(server, bodies: path, rate: 50, connections: 2, seconds: 0.1)) { error in
            XCTAssertEqual((error as? BodiesFile.Refused)?.reason,
                           "the run makes 5 requests but the bodies file has 4 lines (one per request, none sent twice)")
        }
        XCTAssertEqual(server.requestsRead, 0)
        let run = try pace(server, bodies: path, rate: 40, connections: 2, seconds: 0.1)
        XCTAssertEqual(PaceSummary(run, maxLagMs: 1000).errors, 0)
        XCTAssertEqual(server.bodiesRead.sorted(), ["{\"a\":1}", "{\"a\":2}", "{\"a\":3}", "{\"a\":4}"])
    }

    /// Outside input: a blank line, a CR LF file or a line over the limit is refused with its number,
    /// before the run; an empty file is zero bodies, not one.
    func testABodiesFileWithABadLineIsRefusedWithItsNumber() throws {
        func refusal(_ text: String, maxLineBytes: Int = 16) throws -> String? {
            let path = try bodiesFile(text)
            do {
                _ = try BodiesFile(path: path, maxLineBytes: maxLineBytes)
                return nil
            } catch {
                return error.reason.replacingOccurrences(of: path, with: "FILE")
            }
        }
        XCTAssertEqual(try refusal("a\n\nb\n"), "the bodies file FILE: line 2 is empty or ends in CR (one body per LF-terminated line)")
        XCTAssertEqual(try refusal("a\r\nb\r\n"), "the bodies file FILE: line 1 is empty or ends in CR (one body per LF-terminated line)")
        XCTAssertEqual(try refusal("a\n" + String(repeating: "y", count: 17) + "\n"), "the bodies file FILE: line 2 is over the limit of 16 bytes")
        XCTAssertEqual(try refusal(String(repeating: "y", count: 17)), "the bodies file FILE: line 1 is over the limit of 16 bytes")
        XCTAssertNil(try refusal(String(repeating: "y", count: 16) + "\n" + String(repeating: "z", count: 16)))
        XCTAssertEqual(try BodiesFile(path: try bodiesFile("")).count, 0)
        XCTAssertEqual(try BodiesFile(path: try bodiesFile("a\nbc")).count, 2)
        XCTAssertThrowsError(try BodiesFile(path: "/nonexistent/pace-bodies"))
    }

    func testPercentilesAreNearestRank() {
        let values = (1...1000).map(Double.init)
        XCTAssertEqual(PaceSummary.percentile(values, 50), 500)
        XCTAssertEqual(PaceSummary.percentile(values, 99), 990)
        XCTAssertEqual(PaceSummary.percentile(values, 99.9), 999)
        XCTAssertEqual(PaceSummary.percentile([7], 99.9), 7)
    }
}
