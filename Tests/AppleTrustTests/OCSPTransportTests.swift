import AppleTrust
import Foundation
import IAPCore
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The default OCSP transport (`UpstreamHTTPClient`) against a scripted loopback HTTP server: it must
/// refuse redirects and oversized answers (the answer is signature-checked later, but the transport must not be a
/// lever to send the verifier elsewhere or make it buffer without bound).
final class OCSPTransportTests: XCTestCase {
    /// What the default transport makes of `path` on `server`: the body, or the refusal's code and message.
    func post(_ path: String, on server: ScriptedHTTPServer) async -> Result<Data, VerificationError> {
        let url = URL(string: "http://127.0.0.1:\(server.port)\(path)")!
        do throws(VerificationError) {
            return .success(try await UpstreamOCSPTransport().post(Data([0x30, 0x00]), to: url, timeout: .seconds(5)))
        } catch {
            return .failure(error)
        }
    }

    func assertRefused(_ outcome: Result<Data, VerificationError>, file: StaticString = #filePath, line: UInt = #line) {
        guard case .failure(let error) = outcome else { return XCTFail("answered \(outcome)", file: file, line: line) }
        XCTAssertEqual(error.code, .revocationCheckUnavailable, file: file, line: line)
        // A refusal names no host or port (it reaches API callers).
        XCTAssertFalse(error.message.contains("127.0.0.1"), error.message, file: file, line: line)
    }

    func testRedirectIsNotFollowed() async throws {
        let server = try ScriptedHTTPServer()
        defer { server.stop() }
        assertRefused(await post("/redirect", on: server))
        XCTAssertFalse(server.requestedPaths.contains("/ok"), "the redirect target was fetched")
    }

    func testAnswerOverTheCapIsRefused() async throws {
        let server = try ScriptedHTTPServer()
        defer { server.stop() }
        assertRefused(await post("/big", on: server))
    }

    func testPlainAnswerIsReturned() async throws {
        let server = try ScriptedHTTPServer()
        defer { server.stop() }
        let answer = try await post("/ok", on: server).get()
        XCTAssertEqual(answer, Data("OCSP".utf8))
        XCTAssertEqual(server.requestedPaths, ["/ok"])
    }

    func testNonOKStatusIsRefused() async throws {
        let server = try ScriptedHTTPServer()
        defer { server.stop() }
        assertRefused(await post("/missing", on: server))
    }

    func testClosedPortIsRefusedAsUnreachable() async throws {
        let server = try ScriptedHTTPServer()
        let port = server.port
        server.stop()
        let url = URL(string: "http://127.0.0.1:\(port)/ok")!
        do throws(VerificationError) {
            _ = try await UpstreamOCSPTransport().post(Data([0x30, 0x00]), to: url, timeout: .seconds(5))
            XCTFail("a closed port answered")
        } catch {
            XCTAssertEqual(error.code, .revocationCheckUnavailable)
            XCTAssertFalse(error.message.contains("\(port)"), error.message)
        }
    }
}

/// A loopback HTTP/1.1 server answering by path: /ok → 200 "OCSP", /redirect → 302 to /ok,
/// /big → 200 with 100 KiB, anything else → 404. One request per connection.
final class ScriptedHTTPServer: @unchecked Sendable {
    let port: UInt16
    private let fd: Int32
    private let lock = NSLock()
    private var paths: [String] = []
    private var stopped = false
    private let finished = DispatchSemaphore(value: 0)

    var requestedPaths: [String] { lock.withLock { paths } }

    init() throws {
        (fd, port) = try listenOnLoopback(backlog: 8)
        Thread { [self] in serve() }.start()
    }

    func stop() {
        lock.withLock { stopped = true }
        shutdown(fd, Int32(SHUT_RDWR))
        finished.wait()
        close(fd)
    }

    private func serve() {
        defer { finished.signal() }
        while true {
            let client = accept(fd, nil, nil)
            if client < 0 { return }
            if lock.withLock({ stopped }) { close(client); return }
            handle(client)
            close(client)
        }
    }

    private func handle(_ client: Int32) {
        var request = [UInt8]()
        var buf = [UInt8](repeating: 0, count: 4096)
        while !request.contains(0x0a) || !String(decoding: request, as: UTF8.self).contains("\r\n\r\n") {
            let n = read(client, &buf, buf.count)
            if n <= 0 { return }
            request += buf[0..<n]
        }
        let line = String(decoding: request, as: UTF8.self).split(separator: "\r\n").first ?? ""
        let path = line.split(separator: " ").dropFirst().first.map(String.init) ?? ""
        lock.withLock { paths.append(path) }
        let response: String
        switch path {
        case "/ok": response = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nOCSP"
        case "/redirect": response = "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:\(port)/ok\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        case "/big":
            let body = String(repeating: "A", count: 100 * 1024)
            response = "HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
        default: response = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        }
        var bytes = Array(response.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            bytes = bytes.dropFirst(n)
        }
    }
}

/// A TCP socket listening on 127.0.0.1 at a port the kernel picks.
func listenOnLoopback(backlog: Int32) throws -> (fd: Int32, port: UInt16) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw VerificationError(.invalidConfiguration, "socket") }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = 0
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &addr) { p in
        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
            bind(fd, sa, len) == 0 && listen(fd, backlog) == 0 && getsockname(fd, sa, &len) == 0
        }
    }
    guard bound else { close(fd); throw VerificationError(.invalidConfiguration, "bind") }
    return (fd, UInt16(bigEndian: addr.sin_port))
}
