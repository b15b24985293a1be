@testable import HTTPServer
import XCTest

/// What the socket suites share: servers started on ephemeral loopback ports and shut down after
/// each test.
class HTTPServerTestCase: XCTestCase {
    private var servers: [HTTPServer] = []

    override func tearDown() async throws {
        for server in servers { await server.shutdown(gracePeriod: .milliseconds(200)) }
        servers = []
    }

    func startedServer(_ configuration: HTTPServerConfiguration, handler: @escaping HTTPHandler) throws -> HTTPServer {
        let server = try HTTPServer(configuration: configuration, handler: handler)
        try server.start()
        servers.append(server)
        return server
    }
}
