import Foundation
import Synchronization
import XCTest
@testable import UpstreamHTTP

final class UpstreamHTTPClientTests: XCTestCase {
    private func makeClient(requestTimeout: Duration = .seconds(10), maxResponseBytes: Int = 4 << 20,
                            maxConnectionsPerHost: Int = 4) throws -> UpstreamHTTPClient {
        try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(
            connectTimeout: .seconds(2), requestTimeout: requestTimeout, maxResponseBytes: maxResponseBytes,
            maxConnectionsPerHost: maxConnectionsPerHost, userAgent: "UpstreamHTTPTests"))
    }

    private func expectError(_ expected: UpstreamError, _ operation: () async throws(UpstreamError) -> UpstreamResponse,
                             file: StaticString = #filePath, line: UInt = #line) async {
        do {
            let response = try await operation()
            XCTFail("expected \(expected), got status \(response.status)", file: file, line: line)
        } catch {
            XCTAssertEqual(error, expected, file: file, line: line)
        }
    }

    func testPostRoundTripCarriesMethodHeadersAndBodyBothWays() async throws {
        let server = try LoopbackServer { request in
            .respond(status: 201, headers: [("X-Echo-Method", request.method), ("Set-Thing", "a"), ("set-thing", "b")],
                     body: Array(request.body.reversed()))
        }
        defer { server.stop() }
        let client = try makeClient()
        let body = Array("{\"receipt-data\":\"abc\"}".utf8)
        let response = try await client.send(UpstreamRequest(
            method: "POST", url: server.baseURL + "/verifyReceipt?x=1",
            headers: [("Content-Type", "application/json"), ("Authorization", "Bearer t0ken")], body: body))

        XCTAssertEqual(response.status, 201)
        XCTAssertEqual(response.body, Array(body.reversed()))
        XCTAssertEqual(response.headers["x-echo-method"], "POST")
        XCTAssertEqual(response.headers["set-thing"], "a, b")
        let received = try XCTUnwrap(server.requests.first)
        XCTAssertEqual(received.method, "POST")
        XCTAssertEqual(received.target, "/verifyReceipt?x=1")
        XCTAssertEqual(received.headers["content-type"], "application/json")
        XCTAssertEqual(received.headers["authorization"], "Bearer t0ken")
        XCTAssertEqual(received.headers["user-agent"], "UpstreamHTTPTests")
        XCTAssertNil(received.headers["expect"])
        XCTAssertEqual(received.body, body)
    }

    func testGetRoundTripSendsNoBody() async throws {
        let server = try LoopbackServer { _ in .respond(status: 200, body: Array("ok".utf8)) }
        defer { server.stop() }
        let client = try makeClient()
        let response = try await client.send(UpstreamRequest(url: server.baseURL + "/inApps/v1/history/1"))
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.body, Array("ok".utf8))
        XCTAssertEqual(server.requests.map(\.method), ["GET"])
        XCTAssertEqual(server.requests.first?.body, [])
    }

    func testSequentialRequestsReuseOneConnection() async throws {
        let server = try LoopbackServer { _ in .respond(status: 200, body: [1, 2, 3]) }
        defer { server.stop() }
        let client = try makeClient()
        for index in 0..<5 {
            let method = index.isMultiple(of: 2) ? "GET" : "POST"
            let response = try await client.send(UpstreamRequest(method: method, url: server.baseURL + "/r\(index)",
                                                                 body: method == "POST" ? [9] : nil))
            XCTAssertEqual(response.status, 200)
        }
        XCTAssertEqual(server.requests.count, 5)
        XCTAssertEqual(server.acceptedConnections, 1)
    }

    func testFourConcurrentRequestsAreInFlightTogether() async throws {
        // The server answers only once all four requests have arrived: serialised requests would get 500s.
        let arrived = Mutex(0)
        let server = try LoopbackServer { _ in
            arrived.withLock { $0 += 1 }
            for _ in 0..<500 where arrived.withLock({ $0 }) < 4 { usleep(10_000) }
            return arrived.withLock { $0 } >= 4 ? .respond(status: 200) : .respond(status: 500)
        }
        defer { server.stop() }
        let client = try makeClient(maxConnectionsPerHost: 4)
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<4 {
                group.addTask { try await client.send(UpstreamRequest(url: server.baseURL + "/c\(index)")).status }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        XCTAssertEqual(statuses, [200, 200, 200, 200])
        XCTAssertEqual(server.acceptedConnections, 4)
    }

    func testPerHostLimitQueuesConcurrentRequestsOnOneConnection() async throws {
        let server = try LoopbackServer { _ in .respond(status: 204) }
        defer { server.stop() }
        let client = try makeClient(maxConnectionsPerHost: 1)
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<3 {
                group.addTask { try await client.send(UpstreamRequest(url: server.baseURL + "/q\(index)")).status }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        XCTAssertEqual(statuses, [204, 204, 204])
        XCTAssertEqual(server.acceptedConnections, 1)
    }

    func testRefusedConnectionIsConnectFailedAndRetryable() async throws {
        let port = try LoopbackServer.unusedPort()
        let client = try makeClient()
        do {
            _ = try await client.send(UpstreamRequest(method: "POST", url: "http://127.0.0.1:\(port)/",
                                                      headers: [("Authorization", "Bearer SECRET-TOKEN")],
                                                      body: Array("SECRET-BODY".utf8)))
            XCTFail("expected connectFailed")
        } catch {
            guard case .connectFailed = error else { return XCTFail("expected connectFailed, got \(error)") }
            XCTAssertTrue(error.isRetryable)
            XCTAssertFalse(String(describing: error).contains("SECRET"))
        }
    }

    func testSilentServerTimesOutAtTheConfiguredTimeout() async throws {
        let server = try LoopbackServer { _ in .hang }
        defer { server.stop() }
        let client = try makeClient(requestTimeout: .seconds(1))
        let started = ContinuousClock.now
        await expectError(.timedOut) { () async throws(UpstreamError) in
            try await client.send(UpstreamRequest(url: server.baseURL + "/slow"))
        }
        // Loose bound: proves the 1 s timeout fired rather than some default minutes later.
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5))
        XCTAssertTrue(UpstreamError.timedOut.isRetryable)
    }

    /// Issue 10 item 4: under a deadline (a request's budget) a transfer is cut to what is left of it,
    /// whatever the client's own timeouts; once it has passed, nothing is sent at all.
    func testATransferEndsAtTheEnclosingDeadlineNotAtTheRequestTimeout() async throws {
        let served = Mutex(0)
        let server = try LoopbackServer { _ in served.withLock { $0 += 1 }; return .hang }
        defer { server.stop() }
        let client = try makeClient(requestTimeout: .seconds(15))
        let started = ContinuousClock.now
        let result: UpstreamError? = await UpstreamDeadline.within(.seconds(1)) { () async -> UpstreamError? in
            do throws(UpstreamError) { _ = try await client.send(UpstreamRequest(url: server.baseURL + "/slow")); return nil } catch { return error }
        }
        XCTAssertEqual(result, .timedOut)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5), "the 1 s deadline, not the 15 s timeout")
        let late: UpstreamError? = await UpstreamDeadline.within(.zero) { () async -> UpstreamError? in
            do throws(UpstreamError) { _ = try await client.send(UpstreamRequest(url: server.baseURL + "/late")); return nil } catch { return error }
        }
        XCTAssertEqual(late, .timedOut)
        XCTAssertEqual(served.withLock { $0 }, 1, "no request once the deadline has passed")
    }

    func testDeclaredOversizedResponseIsRefused() async throws {
        let server = try LoopbackServer { _ in .respond(status: 200, body: [UInt8](repeating: 7, count: 1025)) }
        defer { server.stop() }
        let client = try makeClient(maxResponseBytes: 1024)
        await expectError(.responseTooLarge(1024)) { () async throws(UpstreamError) in
            try await client.send(UpstreamRequest(url: server.baseURL + "/big"))
        }
    }

    func testUndeclaredOversizedResponseIsAbortedInTheWriteCallback() async throws {
        let head = Array("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".utf8)
        let server = try LoopbackServer { _ in .raw(head + [UInt8](repeating: 7, count: 64 * 1024)) }
        defer { server.stop() }
        let client = try makeClient(maxResponseBytes: 1024)
        await expectError(.responseTooLarge(1024)) { () async throws(UpstreamError) in
            try await client.send(UpstreamRequest(url: server.baseURL + "/stream"))
        }
        XCTAssertFalse(UpstreamError.responseTooLarge(1024).isRetryable)
    }

    func testResponseExactlyAtTheLimitIsAccepted() async throws {
        let server = try LoopbackServer { _ in .respond(status: 200, body: [UInt8](repeating: 7, count: 1024)) }
        defer { server.stop() }
        let client = try makeClient(maxResponseBytes: 1024)
        let response = try await client.send(UpstreamRequest(url: server.baseURL + "/edge"))
        XCTAssertEqual(response.body.count, 1024)
    }

    func testPlainHTTPToNonLoopbackHostIsRefusedBeforeCurlRuns() async throws {
        let client = try makeClient()
        await expectError(.insecureScheme(host: "example.com")) { () async throws(UpstreamError) in
            try await client.send(UpstreamRequest(url: "http://example.com/verifyReceipt"))
        }
        await expectError(.insecureScheme(host: "127.0.0.1.example.com")) { () async throws(UpstreamError) in
            try await client.send(UpstreamRequest(url: "http://127.0.0.1.example.com/"))
        }
        await expectError(.insecureScheme(host: "localhost.example.com")) { () async throws(UpstreamError) in
            try await client.send(UpstreamRequest(url: "HTTP://localhost.example.com/"))
        }
        XCTAssertEqual(client.transfersStarted, 0)
    }

    func testUnsupportedSchemesCredentialsAndHeaderInjectionAreRefusedBeforeCurlRuns() async throws {
        let client = try makeClient()
        for url in ["ftp://127.0.0.1/", "file:///etc/passwd", "not a url", "https://user:pw@127.0.0.1/"] {
            do {
                _ = try await client.send(UpstreamRequest(url: url))
                XCTFail("\(url) was accepted")
            } catch {
                guard case .invalidURL = error else { return XCTFail("\(url): expected invalidURL, got \(error)") }
                XCTAssertFalse(String(describing: error).contains("pw@"))
            }
        }
        await expectError(.invalidHeader(name: "X-Evil")) { () async throws(UpstreamError) in
            try await client.send(UpstreamRequest(url: "http://127.0.0.1:1/", headers: [("X-Evil", "a\r\nHost: b")]))
        }
        XCTAssertEqual(client.transfersStarted, 0)
    }

    func testLoopbackRecognitionCoversIPv4BlockIPv6AndLocalhostOnly() {
        for host in ["127.0.0.1", "127.255.0.9", "[::1]", "localhost", "LOCALHOST"] {
            XCTAssertTrue(URLPolicy.isLoopback(host: host), host)
        }
        for host in ["128.0.0.1", "10.0.0.1", "[::2]", "[::ffff:8.8.8.8]", "localhost.", "example.com", "0.0.0.0"] {
            XCTAssertFalse(URLPolicy.isLoopback(host: host), host)
        }
    }

    func testHTTPSIsAcceptedForAnyHostByThePolicy() throws {
        XCTAssertEqual(try URLPolicy.check("https://buy.itunes.apple.com/verifyReceipt").host, "buy.itunes.apple.com")
        XCTAssertEqual(try URLPolicy.check("http://[::1]:8080/x").host, "[::1]")
    }

    func testPlainHTTPToAnyHostOnlyWhereTheClientAllowsIt() throws {
        XCTAssertThrowsError(try URLPolicy.check("http://ocsp.apple.com/ocsp03-wwdrg601"))
        XCTAssertEqual(try URLPolicy.check("http://ocsp.apple.com/ocsp03-wwdrg601", plainHTTPToAnyHost: true).host, "ocsp.apple.com")
        // Still http or https only, and still no credentials in the URL.
        XCTAssertThrowsError(try URLPolicy.check("ftp://ocsp.apple.com/", plainHTTPToAnyHost: true))
        XCTAssertThrowsError(try URLPolicy.check("http://user:pw@ocsp.apple.com/", plainHTTPToAnyHost: true))
    }

    func testInvalidConfigurationIsRefused() {
        XCTAssertThrowsError(try UpstreamHTTPClient(configuration: .init(requestTimeout: .zero)))
        XCTAssertThrowsError(try UpstreamHTTPClient(configuration: .init(maxConnectionsPerHost: 0)))
        XCTAssertThrowsError(try UpstreamHTTPClient(configuration: .init(caBundlePath: "/nonexistent/ca.pem"))) { error in
            guard case UpstreamError.invalidConfiguration = error else { return XCTFail("got \(error)") }
        }
    }

    func testCancellingTheCallerAbortsTheTransfer() async throws {
        let server = try LoopbackServer { _ in .hang }
        defer { server.stop() }
        let client = try makeClient(requestTimeout: .seconds(30))
        let task = Task { () async throws(UpstreamError) -> UpstreamResponse in
            try await client.send(UpstreamRequest(url: server.baseURL + "/never"))
        }
        while server.requests.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        task.cancel()
        let result = await task.result
        XCTAssertThrowsError(try result.get()) { XCTAssertEqual($0 as? UpstreamError, .cancelled) }
    }
}
