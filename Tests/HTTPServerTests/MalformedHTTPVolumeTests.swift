import Foundation
@testable import HTTPServer
import Synchronization
import XCTest

/// Bad clients in numbers against the server the gateway runs (its thread count, limits and a short
/// whole-request deadline): none of them gets the handler called with a broken request, and a
/// polite client keeps getting answers throughout.
final class MalformedHTTPVolumeTests: XCTestCase {
    private var server: HTTPServer!
    private final class PathLog: Sendable { let paths = Mutex<[String]>([]) }
    private let log = PathLog()
    private var handledPaths: [String] { log.paths.withLock { $0 } }

    override func setUp() async throws {
        // As GatewayAssembly configures it, but a 2 s request deadline instead of 10 s to keep the test short.
        let configuration = HTTPServerConfiguration(port: 0, maxBodyBytes: 256 * 1024, connectionTimeoutSeconds: 2)
        server = try HTTPServer(configuration: configuration) { [log] request in
            log.paths.withLock { $0.append(request.path) }
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/plain")], body: Array("ok \(request.body.count)".utf8))
        }
        try server.start()
    }

    override func tearDown() async throws {
        await server.shutdown(gracePeriod: .milliseconds(200))
    }

    /// A polite request, which must be answered 200 within the raw client's 2 s read timeout.
    private func assertServed(_ what: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let connection = try RawConnection(port: server.port, readTimeoutSeconds: 2)
        connection.send("GET /polite HTTP/1.1\r\nHost: x\r\n\r\n")
        let response = try connection.readResponse()
        XCTAssertEqual(response.status, 200, what, file: file, line: line)
    }

    /// The server refused (an error status) or hung up; it never answered 2xx.
    private func assertRefusedOrClosed(_ connection: RawConnection, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        if let response = try? connection.readResponse() {
            XCTAssertTrue((400..<600).contains(response.status), "\(what): answered \(response.status)", file: file, line: line)
        }
    }

    func testTwoHundredSlowlorisConnectionsDoNotStopAPoliteClientAndAreAllCutAtTheDeadline() async throws {
        let port = server.port
        var slow: [RawConnection] = []
        for _ in 0..<200 {
            let connection = try RawConnection(port: port, readTimeoutSeconds: 3)
            connection.send("GET /slow HTTP/1.1\r\nHost: x\r\n")
            slow.append(connection)
        }
        // Trickle one byte per connection every 100 ms for 3 s (past the 2 s deadline), serving a polite request each round.
        var open = Array(slow.indices)
        for round in 0..<30 {
            open = open.filter { slow[$0].send("X") }
            try assertServed("polite request \(round) while \(open.count) slowloris connections are open")
            try await Task.sleep(for: .milliseconds(100))
        }
        XCTAssertEqual(slow.filter { !$0.isClosedByPeer() }.count, 0, "every trickling connection is closed at the deadline")
        XCTAssertFalse(handledPaths.contains("/slow"), "no trickled request reached the handler")
    }

    func testOversizedHeaderLinesAndTooManyHeadersAreRefusedAtVolumeAndServingContinues() throws {
        var connections: [(RawConnection, String)] = []
        for i in 0..<100 {
            let connection = try RawConnection(port: server.port, readTimeoutSeconds: 3)
            if i % 2 == 0 {
                connection.send("GET /huge HTTP/1.1\r\nHost: x\r\nX-Huge: " + String(repeating: "h", count: 64 * 1024) + "\r\n\r\n")
                connections.append((connection, "64 KiB header line"))
            } else {
                connection.send("GET /many HTTP/1.1\r\nHost: x\r\n" + (0..<4000).map { "X-H\($0): v\r\n" }.joined() + "\r\n")
                connections.append((connection, "4000 headers"))
            }
        }
        for (connection, what) in connections { assertRefusedOrClosed(connection, what) }
        try assertServed("after 100 oversized requests")
        XCTAssertEqual(handledPaths.filter { $0 == "/huge" || $0 == "/many" }, [], "no oversized request reached the handler")
        // Many headers that do fit are an ordinary request.
        let fits = try RawConnection.request(port: server.port, "GET /fits HTTP/1.1\r\nHost: x\r\n" + (0..<200).map { "X-H\($0): v\r\n" }.joined() + "\r\n")
        XCTAssertEqual(fits.status, 200)
    }

    func testGarbageBytesAndInvalidRequestLinesAreRefusedAndServingContinues() throws {
        let invalid = [
            "GARBAGE\r\n\r\n", "GET\r\n\r\n", " / HTTP/1.1\r\nHost: x\r\n\r\n", "GET / HTTP/9.9\r\nHost: x\r\n\r\n",
"GET / HTTP/1.1\r\nNoColonHeader\r\n\r\n",
            "POST /neg HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", "POST /nan HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
            "POST /chunk HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
            "POST /two HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
            "POST /same HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\nabcd",
            "POST /both HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n",
        ]
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        func randomByte() -> UInt8 { seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17; return UInt8(truncatingIfNeeded: seed) }
        var connections: [(RawConnection, String)] = []
        for i in 0..<120 {
            let connection = try RawConnection(port: server.port, readTimeoutSeconds: 3)
            if i < invalid.count * 6 {
                connection.send(invalid[i % invalid.count])
                connections.append((connection, invalid[i % invalid.count].debugDescription))
            } else {
                connection.send((0..<512).map { _ in randomByte() } + Array("\r\n\r\n".utf8))
                connections.append((connection, "random bytes"))
            }
        }
        for (connection, what) in connections { assertRefusedOrClosed(connection, what) }
        try assertServed("after 120 malformed requests")
        let reached = Set(handledPaths)
        for path in ["/neg", "/nan", "/chunk", "/two", "/same", "/both"] {
            XCTAssertFalse(reached.contains { $0.hasPrefix(path) }, "\(path) reached the handler")
        }
    }

    func testBodiesShorterThanTheirContentLengthNeverReachTheHandlerAndServingContinues() throws {
        for round in 0..<100 {
            let connection = try RawConnection(port: server.port, readTimeoutSeconds: 3)
            connection.send("POST /short HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"a\":1}")
            shutdown(connection.fd, Int32(SHUT_WR))
            assertRefusedOrClosed(connection, "short body \(round)")
        }
        try assertServed("after 100 truncated bodies")
        XCTAssertFalse(handledPaths.contains("/short"), "a truncated body reached the handler")
    }
}

/// Regression: libmicrohttpd 0.9.75 served a request with two Content-Length headers (or one beside
/// Transfer-Encoding) using one of them, the classic request-smuggling ambiguity.
final class RequestFramingTests: XCTestCase {
    func testTwoBodyLengthsAreRefused400WithoutCallingTheHandler() async throws {
        let server = try HTTPServer(configuration: HTTPServerConfiguration(port: 0)) { _ in
            HTTPResponse(status: 200, headers: [], body: Array("handled".utf8))
        }
        try server.start()
        for framing in ["Content-Length: 3\r\nContent-Length: 4", "Content-Length: 4\r\nContent-Length: 4",
                        "Content-Length: 4\r\nTransfer-Encoding: chunked"] {
            let response = try RawConnection.request(port: server.port, "POST /x HTTP/1.1\r\nHost: x\r\n\(framing)\r\n\r\nabcd")
            XCTAssertEqual(response.status, 400, framing)
            XCTAssertTrue(response.bodyText.contains("MALFORMED_REQUEST"), response.bodyText)
        }
        let single = try RawConnection.request(port: server.port, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd")
        XCTAssertEqual(single.bodyText, "handled")
        await server.shutdown(gracePeriod: .milliseconds(200))
    }
}
