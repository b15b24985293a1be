import Foundation
import Synchronization
import XCTest
@testable import UpstreamHTTP

/// Records what the client reports, for assertions.
private final class RecordingObserver: UpstreamCallObserver {
    let calls = Mutex<[(UpstreamCallLabel, String)]>([])
    func upstreamCallFinished(_ label: UpstreamCallLabel, outcome: UpstreamCallOutcome, duration: Duration) {
        calls.withLock { $0.append((label, outcome.label)) }
    }
    var outcomes: [String] { calls.withLock { $0.map(\.1) } }
}

final class UpstreamCallObserverTests: XCTestCase {
    private let label = UpstreamCallLabel(endpoint: "getTransactionInfo", environment: "production")

    private func client(_ observer: RecordingObserver, requestTimeout: Duration = .seconds(10)) throws -> UpstreamHTTPClient {
        try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(connectTimeout: .seconds(2), requestTimeout: requestTimeout),
                               observer: observer)
    }

    func testLabelledCallsAreReportedWithTheirOutcomeClassAndUnlabelledOnesAreNot() async throws {
        let server = try LoopbackServer { request in
            request.target == "/missing" ? .respond(status: 404) : (request.target == "/down" ? .respond(status: 503) : .respond(status: 200))
        }
        defer { server.stop() }
        let observer = RecordingObserver()
        let client = try client(observer)

        _ = try await client.send(UpstreamRequest(url: server.baseURL + "/ok", label: label))
        _ = try await client.send(UpstreamRequest(url: server.baseURL + "/missing", label: label))
        _ = try await client.send(UpstreamRequest(url: server.baseURL + "/down", label: label))
        _ = try await client.send(UpstreamRequest(url: server.baseURL + "/ok"))

        XCTAssertEqual(observer.outcomes, ["ok", "http_4xx", "http_5xx"])
        XCTAssertEqual(observer.calls.withLock { $0.map(\.0) }, [label, label, label])
    }

    func testTimeoutsTransportErrorsAndRefusalsAreReportedAsSuch() async throws {
        let silent = try LoopbackServer { _ in .hang }
        defer { silent.stop() }
        let observer = RecordingObserver()
        let client = try client(observer, requestTimeout: .seconds(1))

        _ = try? await client.send(UpstreamRequest(url: silent.baseURL + "/slow", label: label))
        _ = try? await client.send(UpstreamRequest(url: "http://127.0.0.1:\(try LoopbackServer.unusedPort())/", label: label))
        _ = try? await client.send(UpstreamRequest(url: "ftp://example.com/", label: label))

        XCTAssertEqual(observer.outcomes, ["timeout", "transport_error", "refused"])
    }
}
