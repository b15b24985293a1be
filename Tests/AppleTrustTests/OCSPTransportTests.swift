import AppleTrust
import Foundation
import IAPCore
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The default OCSP transport against a scripted loopback HTTP server: it must refuse redirects
/// and oversized answers (the answer is signature-checked later, but the transport must not be a
/// lever to send the verifier elsewhere or make it buffer without bound).
final class OCSPTransportTests: XCTestCase {
    func testRedirectIsNotFollowed() throws {
        let server = try ScriptedHTTPServer()
        defer { server.stop() }
        let url = URL(string: "http://127.0.0.1:\(server.port)/redirect")!
        assertRefused(.revocationCheckUnavailable) { try URLSessionOCSPTransport().post(Data([0x30, 0x00]), to: url, timeout: 5) }
        XCTAssertFalse(server.requestedPaths.contains("/ok"), "the redirect target was fetched")
    }

    func testAnswerOverTheCapIsRefused() throws {
        let server = try ScriptedHTTPServer()
        defer { server.stop() }
        let url = URL(string: "http://127.0.0.1:\(server.port)/big")!
        assertRefused(.revocationCheckUnavailable) { try URLSessionOCSPTransport().post(Data([0x30, 0x00]), to: url, timeout: 5) }
    }

    func testPlainAnswerIsReturned() throws {
        let server = try ScriptedHTTPServer()
        defer { server.stop() }
        let url = URL(string: "http://127.0.0.1:\(server.port)/ok")!
        XCTAssertEqual(try URLSessionOCSPTransport().post(Data([0x30, 0x00]), to: url, timeout: 5), Data("OCSP".utf8))
    }

    func testNonOKStatusIsRefused() throws {
        let server = try ScriptedHTTPServer()
        defer { server.stop() }
        let url = URL(string: "http://127.0.0.1:\(server.port)/missing")!
        assertRefused(.revocationCheckUnavailable) { try URLSessionOCSPTransport().post(Data([0x30, 0x00]), to: url, timeout: 5) }
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
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw VerificationError(.invalidConfiguration, "socket") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                bind(fd, sa, len) == 0 && listen(fd, 8) == 0 && getsockname(fd, sa, &len) == 0
            }
        }
        guard bound else { close(fd); throw VerificationError(.invalidConfiguration, "bind") }
        self.fd = fd
        port = UInt16(bigEndian: addr.sin_port)
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
