import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import HTTPServer
import XCTest

/// Real loopback sockets against a server on an ephemeral port.
final class HTTPServerTests: HTTPServerTestCase {
    private func startServer(_ configure: (inout HTTPServerConfiguration) -> Void = { _ in },
                             handler: @escaping HTTPHandler) throws -> HTTPServer {
        var configuration = HTTPServerConfiguration(port: 0)
        configure(&configuration)
        return try startedServer(configuration, handler: handler)
    }

    private static let echo: HTTPHandler = { request in
        var headers: [(String, String)] = [
            ("Content-Type", request.headers["Content-Type"] ?? "application/octet-stream"),
            ("X-Echo-Method", request.method),
            ("X-Echo-Path", request.path),
            ("X-Echo-Segments", (request.pathSegments ?? ["<invalid>"]).joined(separator: "|")),
            ("X-Echo-Custom", request.headers["x-custom-header"] ?? "<absent>"),
            ("X-Echo-Remote", request.remoteAddress),
        ]
        for (name, value) in request.query.sorted(by: { $0.key < $1.key }) {
            headers.append(("X-Echo-Query-\(name)", value))
        }
        return HTTPResponse(status: 200, headers: headers, body: request.body)
    }

    func testEchoRoundTripCarriesMethodPathQueryHeadersAndA100KBBodyReadInSeveralPieces() async throws {
        let server = try startServer(handler: Self.echo)
        XCTAssertNotEqual(server.port, 0, "port 0 must be read back as the kernel's choice")
        let body = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(server.port)/v1/a%20b/c?name=h%C3%A9&plus=a+b")!)
        request.httpMethod = "PUT"
        request.setValue("Tested", forHTTPHeaderField: "X-Custom-Header")
        request.setValue("application/x-test", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(body)

        let (data, response) = try await URLSession.shared.data(for: request)
        let http = try XCTUnwrap(response as? HTTPURLResponse)

        XCTAssertEqual(http.statusCode, 200)
        XCTAssertEqual(Array(data), body)
        XCTAssertEqual(http.value(forHTTPHeaderField: "X-Echo-Method"), "PUT")
        XCTAssertEqual(http.value(forHTTPHeaderField: "X-Echo-Path"), "/v1/a%20b/c")
        XCTAssertEqual(http.value(forHTTPHeaderField: "X-Echo-Segments"), "v1|a b|c")
        XCTAssertEqual(http.value(forHTTPHeaderField: "X-Echo-Custom"), "Tested")
        XCTAssertEqual(http.value(forHTTPHeaderField: "X-Echo-Query-name"), "hé")
        XCTAssertEqual(http.value(forHTTPHeaderField: "X-Echo-Query-plus"), "a b")
        XCTAssertEqual(http.value(forHTTPHeaderField: "X-Echo-Remote"), "127.0.0.1")
        XCTAssertEqual(http.value(forHTTPHeaderField: "Content-Type"), "application/x-test")
        XCTAssertGreaterThan(server.bodyChunksReceived, 1)
    }

    func testContentLengthAboveLimitIsAnswered413WithoutReadingTheBody() throws {
        let handlerCalls = Counter()
        let server = try startServer({ $0.maxBodyBytes = 1000 }) { _ in
            handlerCalls.increment()
            return .json(200, "{}")
        }
        let connection = try RawConnection(port: server.port)
        // Only the headers are sent: the answer must not wait for the 10 MB that never comes.
        connection.send("POST /upload HTTP/1.1\r\nHost: x\r\nX-Request-Id: big-1\r\nContent-Length: 10000000\r\n\r\n")
        let response = try connection.readResponse()

        XCTAssertEqual(response.status, 413)
        XCTAssertEqual(response.headers["content-type"], "application/json")
        XCTAssertTrue(response.bodyText.contains("\"code\":\"INPUT_TOO_LARGE\""), response.bodyText)
        XCTAssertTrue(response.bodyText.contains("\"retryable\":false"), response.bodyText)
        // The envelope every refusal has: the body names the request id the header carries.
        XCTAssertEqual(response.headers["x-request-id"], "big-1")
        XCTAssertTrue(response.bodyText.contains("\"requestId\":\"big-1\""), response.bodyText)
        XCTAssertEqual(handlerCalls.value, 0)
    }

    func testChunkedBodyGrowingPastLimitIsCutOffWith413() throws {
        let handlerCalls = Counter()
        let server = try startServer({ $0.maxBodyBytes = 1000 }) { _ in
            handlerCalls.increment()
            return .json(200, "{}")
        }
        let connection = try RawConnection(port: server.port)
        let chunk = "3e8\r\n" + String(repeating: "z", count: 1000) + "\r\n"
        connection.send("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk + chunk)
        let response = try connection.readResponse()

        XCTAssertEqual(response.status, 413)
        XCTAssertTrue(response.bodyText.contains("\"code\":\"INPUT_TOO_LARGE\""), response.bodyText)
        // No X-Request-Id sent: the generated one is in the header and the body alike.
        let requestId = try XCTUnwrap(response.headers["x-request-id"])
        XCTAssertTrue(response.bodyText.contains("\"requestId\":\"\(requestId)\""), response.bodyText)
        XCTAssertEqual(handlerCalls.value, 0)
    }

    func testChunkedBodyWithinLimitReachesTheHandler() throws {
        let server = try startServer({ $0.maxBodyBytes = 1000 }, handler: Self.echo)
        let response = try RawConnection.request(port: server.port,
            "POST /small HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.bodyText, "hello world")
    }

    func testHundredParallelRequestsAreAllAnswered() async throws {
        let server = try startServer { request in
            try? await Task.sleep(for: .milliseconds(20))
            return .json(200, "{\"path\":\"\(request.path)\"}")
        }
        let port = server.port
        let bodies = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for index in 0..<100 {
                group.addTask {
                    let response = try RawConnection.request(port: port, "GET /item/\(index) HTTP/1.1\r\nHost: x\r\n\r\n")
                    XCTAssertEqual(response.status, 200)
                    return (index, response.bodyText)
                }
            }
            var collected: [Int: String] = [:]
            for try await (index, body) in group { collected[index] = body }
            return collected
        }
        XCTAssertEqual(bodies.count, 100)
        for index in 0..<100 { XCTAssertEqual(bodies[index], "{\"path\":\"/item/\(index)\"}") }
    }

    func testShutdownFinishesTheRequestInFlightAndThenRefusesNewConnections() async throws {
        let server = try startServer { _ in
            try? await Task.sleep(for: .milliseconds(300))
            return .json(200, "{\"done\":true}")
        }
        let port = server.port
        let pending = Task.detached { try RawConnection.request(port: port, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n") }
        while server.inFlight == 0 { try await Task.sleep(for: .milliseconds(5)) }

        await server.shutdown(gracePeriod: .seconds(2))

        let response = try await pending.value
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.bodyText, "{\"done\":true}")
        XCTAssertEqual(server.inFlight, 0)
        XCTAssertThrowsError(try RawConnection(port: port)) { error in
            guard case RawHTTPError.connectFailed(let code) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(code, ECONNREFUSED)
        }
    }

    func testHandlerOutlivingTheGracePeriodIsCutOffAndItsLateResponseIsDropped() async throws {
        let finished = Counter()
        let server = try startServer { _ in
            try? await Task.sleep(for: .milliseconds(400))
            finished.increment()
            return .json(200, "{}")
        }
        let port = server.port
        let pending = Task.detached { try RawConnection.request(port: port, "GET /stuck HTTP/1.1\r\nHost: x\r\n\r\n") }
        while server.inFlight == 0 { try await Task.sleep(for: .milliseconds(5)) }

        await server.shutdown(gracePeriod: .milliseconds(50))

        XCTAssertEqual(finished.value, 0, "shutdown must not wait past its grace period")
        do {
            let response = try await pending.value
            XCTFail("expected the connection to be closed, got \(response.status)")
        } catch {
            XCTAssertEqual(error as? RawHTTPError, .closedBeforeResponse)
        }
        // The handler still finishes afterwards; its response must be dropped, not sent to a freed connection.
        while finished.value == 0 { try await Task.sleep(for: .milliseconds(20)) }
        try await Task.sleep(for: .milliseconds(50))
        XCTAssertEqual(server.inFlight, 0)
    }

    func testHeadersLargerThanTheMemoryLimitAreRefusedAndServingContinues() throws {
        let server = try startServer({ $0.maxHeaderBytes = 16 * 1024 }, handler: Self.echo)
        let connection = try RawConnection(port: server.port)
        connection.send("GET / HTTP/1.1\r\nHost: x\r\nX-Huge: " + String(repeating: "h", count: 64 * 1024) + "\r\n\r\n")
        if let response = try? connection.readResponse() {
            XCTAssertEqual(response.status, 431)
        } else {
            XCTAssertTrue(connection.isClosedByPeer(), "the connection must be answered 431 or closed")
        }

        let next = try RawConnection.request(port: server.port, "GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(next.status, 200)
        XCTAssertEqual(next.headers["x-echo-path"], "/after")
    }

    func testSlowlorisConnectionIsClosedAfterTheTimeoutWhileOthersAreServed() async throws {
        let server = try startServer({ $0.connectionTimeoutSeconds = 1 }, handler: Self.echo)
        let port = server.port
        // 60 bytes at one per 200 ms would take 12 s; each byte resets an inactivity timer, so only
        // a whole-request deadline can stop it.
        let header = Array("GET /slow HTTP/1.1\r\nHost: x\r\nX-Padding: ........................\r\n\r\n".utf8)
        let slowSender = Task.detached { () -> Int in
            let connection = try RawConnection(port: port)
            for (index, byte) in header.enumerated() {
                if !connection.send([byte]) { return index }
                try await Task.sleep(for: .milliseconds(200))
            }
            return header.count
        }
        var served = 0
        while served < 5 {
            let response = try RawConnection.request(port: port, "GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
            XCTAssertEqual(response.status, 200)
            served += 1
            try await Task.sleep(for: .milliseconds(100))
        }
        let bytesSentBeforeClose = try await slowSender.value
        XCTAssertLessThan(bytesSentBeforeClose, header.count, "the trickling connection must be cut before it finishes")
        XCTAssertEqual(served, 5)
    }

    func testRequestIdIsEchoedWhenSaneAndGeneratedOtherwise() throws {
        let seen = Recorder()
        let server = try startServer { request in
            seen.record(request.requestId)
            return .json(200, "{}")
        }
        let sane = try RawConnection.request(port: server.port,
                                             "GET / HTTP/1.1\r\nHost: x\r\nX-Request-Id: order-42_A.b\r\n\r\n")
        XCTAssertEqual(sane.headers["x-request-id"], "order-42_A.b")

        let hostile = try RawConnection.request(port: server.port,
                                                "GET / HTTP/1.1\r\nHost: x\r\nX-Request-Id: <script>x</script>\r\n\r\n")
        let generated = try XCTUnwrap(hostile.headers["x-request-id"])
        XCTAssertNotEqual(generated, "<script>x</script>")
        XCTAssertTrue(RequestID.isSane(generated))

        let tooLong = try RawConnection.request(port: server.port,
            "GET / HTTP/1.1\r\nHost: x\r\nX-Request-Id: \(String(repeating: "a", count: 65))\r\n\r\n")
        XCTAssertEqual(tooLong.headers["x-request-id"]?.count, 32)

        let absent = try RawConnection.request(port: server.port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(absent.headers["x-request-id"]?.count, 32)
        XCTAssertEqual(seen.values, ["order-42_A.b", generated, tooLong.headers["x-request-id"]!,
                                     absent.headers["x-request-id"]!])
    }

    func testMalformedQueryEncodingIsAnswered400WithoutCallingTheHandler() throws {
        let handlerCalls = Counter()
        let server = try startServer { _ in
            handlerCalls.increment()
            return .json(200, "{}")
        }
        let response = try RawConnection.request(port: server.port, "GET /x?a=%ZZ HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(response.status, 400)
        XCTAssertTrue(response.bodyText.contains("\"code\":\"MALFORMED_REQUEST\""), response.bodyText)
        XCTAssertEqual(handlerCalls.value, 0)
    }

    func testKeepAliveConnectionServesSeveralRequests() throws {
        let server = try startServer(handler: Self.echo)
        let connection = try RawConnection(port: server.port)
        for index in 0..<3 {
            connection.send("GET /k/\(index) HTTP/1.1\r\nHost: x\r\n\r\n")
            let response = try connection.readResponse()
            XCTAssertEqual(response.headers["x-echo-path"], "/k/\(index)")
        }
    }

    /// A small POST's handler starts on libmicrohttpd's thread: one that never suspends is answered
    /// there, with every thread of Swift's cooperative pool busy (started as a pool task, it would
    /// wait for one). Both framings of the inline finish: a POST with a body and one without, twice
    /// on one connection. A GET starts on the pool (reports may run long before they suspend), so
    /// it is answered once the pool is free again.
    func testASmallPostThatNeverSuspendsIsAnsweredOnTheServersThreadWhileThePoolIsBusy() throws {
        let server = try startServer(handler: Self.echo)
        let width = ProcessInfo.processInfo.activeProcessorCount
        let busy = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        for _ in 0..<width {
            Task.detached { busy.signal(); release.wait() }  // holds a pool thread until released
        }
        var released = false
        defer { if !released { for _ in 0..<width { release.signal() } } }
        for _ in 0..<width { XCTAssertEqual(busy.wait(timeout: .now() + 10), .success) }
        let connection = try RawConnection(port: server.port)
        for index in 0..<2 {
            connection.send("POST /inline/\(index) HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
            let empty = try connection.readResponse()  // throws after 5 s without an answer
            XCTAssertEqual(empty.headers["x-echo-path"], "/inline/\(index)")
            connection.send("POST /inline HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
            let post = try connection.readResponse()
            XCTAssertEqual(post.bodyText, "hello")
        }
        connection.send("GET /pool HTTP/1.1\r\nHost: x\r\n\r\n")
        for _ in 0..<width { release.signal() }
        released = true
        XCTAssertEqual(try connection.readResponse().headers["x-echo-path"], "/pool")
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

final class Recorder: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [String] = []
    func record(_ value: String) { lock.withLock { recorded.append(value) } }
    var values: [String] { lock.withLock { recorded } }
}
