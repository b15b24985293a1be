import Foundation
@testable import Gateway
import HTTPServer
import IAPConfig
import IAPCore
import TestSupport
import XCTest

/// The gateway's HTTP surface: request hygiene, auth, probes, metrics and the OpenAPI document.
final class HTTPSurfaceTests: XCTestCase {
    func testBodyLargerThanMaxBodyBytesIsRefusedWith413() async throws {
        let gw = try await GatewayE2E.start(self)
        let padding = String(repeating: "A", count: 256 * 1024 + 1)
        let body = Array(#"{"account":"alice","receipt":"\#(padding)","nonce":"n"}"#.utf8)

        let answer = try await gw.send("POST", "\(gw.appURL)/verify", body: body)

        XCTAssertEqual(answer.status, 413, answer.text)
        XCTAssertEqual(answer.errorCode, "INPUT_TOO_LARGE")
        let requestId = try XCTUnwrap(answer.headers["x-request-id"])
        XCTAssertEqual(answer.json["error"]?["requestId"]?.stringValue, requestId, answer.text)
    }

    func testBodyOfExactlyMaxBodyBytesIsReadAndJudgedOnItsContent() async throws {
        let gw = try await GatewayE2E.start(self)
        let frame = #"{"account":"alice","transactionId":""}"#
        let id = String(repeating: "1", count: 256 * 1024 - frame.utf8.count)
        let body = Array(#"{"account":"alice","transactionId":"\#(id)"}"#.utf8)
        XCTAssertEqual(body.count, 256 * 1024)

        let answer = try await gw.send("POST", "\(gw.appURL)/verify", body: body)

        // Read and parsed: refused for what it says (an absurd transaction id), not for its size.
        XCTAssertEqual(answer.status, 400, answer.text)
        XCTAssertEqual(answer.errorCode, "MALFORMED_REQUEST")
    }

    // A request body the route cannot read is the request's fault: 400 MALFORMED_REQUEST, the JSON
    // fault in the message (the JSON codes are kept for evidence content, answered 422). What the
    // handler decides (bodies, auth, routes, the document) is asked in process: the wire adds nothing.
    func testMalformedJSONIsRefusedWith400() async throws {
        let gw = try await GatewayE2E.start(self)

        let answer = await gw.handle("POST", "/v1/apps/\(gw.bundleId)/verify", body: Array(#"{"account":"alice","#.utf8))

        XCTAssertEqual(answer.status, 400, answer.text)
        XCTAssertEqual(answer.errorCode, "MALFORMED_REQUEST")
    }

    func testDuplicateJSONKeysAreRefusedWith400() async throws {
        let gw = try await GatewayE2E.start(self)

        let answer = await gw.handle("POST", "/v1/apps/\(gw.bundleId)/verify",
                                     body: Array(#"{"account":"alice","account":"bob","transactionId":"1"}"#.utf8))

        XCTAssertEqual(answer.status, 400, answer.text)
        XCTAssertEqual(answer.errorCode, "MALFORMED_REQUEST")
        XCTAssertTrue(answer.json["error"]?["message"]?.stringValue?.contains("duplicate") ?? false, answer.text)
    }

    func testMissingAPIKeyIsRefusedWith401() async throws {
        let gw = try await GatewayE2E.start(self)

        let answer = await gw.handle("POST", "/v1/apps/\(gw.bundleId)/nonces", body: Array(#"{"account":"alice"}"#.utf8),
                                     apiKey: .some(nil))

        XCTAssertEqual(answer.status, 401, answer.text)
        XCTAssertEqual(answer.errorCode, "UNAUTHENTICATED")
        XCTAssertEqual(answer.headers["www-authenticate"], "Bearer")
    }

    func testWrongAPIKeyIsRefusedWith401AndNotEchoed() async throws {
        let gw = try await GatewayE2E.start(self)
        let wrong = "demo-" + String(repeating: "0", count: 32)

        let answer = await gw.handle("POST", "/v1/apps/\(gw.bundleId)/verify",
                                     body: Array(#"{"account":"alice","transactionId":"1"}"#.utf8), apiKey: .some(wrong))
        let entitlements = await gw.handle("GET", "/v1/apps/\(gw.bundleId)/accounts/alice/entitlements", apiKey: .some(wrong))

        XCTAssertEqual(answer.status, 401, answer.text)
        XCTAssertEqual(answer.errorCode, "UNAUTHENTICATED")
        XCTAssertFalse(answer.text.contains(wrong))
        XCTAssertEqual(entitlements.status, 401, entitlements.text)
    }

    func testUnknownAppIsRefusedWith404() async throws {
        let gw = try await GatewayE2E.start(self)

        let answer = await gw.handle("POST", "/v1/apps/com.example.nobody/nonces", body: Array(#"{"account":"alice"}"#.utf8))

        XCTAssertEqual(answer.status, 404, answer.text)
        XCTAssertEqual(answer.errorCode, "UNKNOWN_APP")
    }

    func testHealthReadinessAndMetricsAnswer() async throws {
        let gw = try await GatewayE2E.start(self)

        let health = try await gw.get("/healthz")
        let ready = try await gw.get("/readyz")
        let metrics = try await gw.get("/metrics")

        XCTAssertEqual(health.status, 200)
        XCTAssertEqual(health.json["status"]?.stringValue, "ok")
        XCTAssertEqual(ready.status, 200)
        XCTAssertEqual(ready.json["status"]?.stringValue, "ready")
        XCTAssertEqual(metrics.status, 200)
        XCTAssertTrue(metrics.text.contains("iapgw_http_requests_total"), metrics.text)
    }

    func testASecretWhoseRefreshFailedKeepsTheGatewayReadyAndIsLoggedAsStale() async throws {
        let logs = LogCapture()
        let gw = try await GatewayE2E.start(self, logger: logs.logger)
        let secret = gw.harness.directory.appendingPathComponent("secrets/shared-secret")
        let moved = secret.appendingPathExtension("away")
        let before = try await gw.get("/readyz")
        XCTAssertEqual(before.status, 200)

        // Gone after start: its last good value serves verifications, so the gateway stays ready.
        try FileManager.default.moveItem(at: secret, to: moved)
        XCTAssertTrue(SecretFiles.shared.refreshNow(within: .seconds(10)))
        let stale = try await gw.get("/readyz")
        XCTAssertEqual(stale.status, 200, stale.text)
        let logged = try XCTUnwrap(logs.captured.first { $0.contains("secret_stale") && $0.contains(gw.bundleId) })
        XCTAssertTrue(logged.contains("sharedSecret"), logged)
        XCTAssertFalse(stale.text.contains(secret.path), "a public probe does not describe the configuration")

        try FileManager.default.moveItem(at: moved, to: secret)
        XCTAssertTrue(SecretFiles.shared.refreshNow(within: .seconds(10)))
        let count = logs.captured.count
        let after = try await gw.get("/readyz")
        XCTAssertEqual(after.status, 200)
        XCTAssertFalse(logs.captured.dropFirst(count).contains { $0.contains("secret_stale") && $0.contains(gw.bundleId) })
    }

    // MARK: OpenAPI

    /// The routes the issue specifies, written out here so the document is checked against
    /// something other than the table it is generated from.
    static let specifiedRoutes: Set<String> = [
        "GET /healthz", "GET /readyz", "GET /openapi.json", "GET /metrics", "GET /dashboard",
        "POST /v1/apps/{bundleId}/nonces", "POST /v1/apps/{bundleId}/verify", "POST /v1/apps/{bundleId}/offer-signatures",
        "GET /v1/apps/{bundleId}/accounts/{account}/entitlements", "GET /v1/apps/{bundleId}/accounts/{account}/history",
        "GET /v1/apps/{bundleId}/orders/{orderId}",
        "POST /v1/notifications/{bundleId}", "POST /v1/retention/{bundleId}",
        "GET /v1/apps/{bundleId}/comparisons", "GET /v1/apps/{bundleId}/cutover-impact", "GET /v1/apps/{bundleId}/rollout",
    ]

    private func documentedOperations(_ gw: GatewayE2E) async throws -> [(method: String, path: String)] {
        let answer = await gw.handle("GET", "/openapi.json")
        XCTAssertEqual(answer.status, 200)
        XCTAssertEqual(answer.json["openapi"]?.stringValue, "3.0.3")
        let paths = try XCTUnwrap(answer.json["paths"]?.objectValue)
        return paths.flatMap { path, operations in
            (operations.objectValue ?? [:]).keys.map { (method: $0.uppercased(), path: path) }
        }
    }

    func testEveryDocumentedOperationIsKnownToTheDispatcher() async throws {
        let gw = try await GatewayE2E.start(self)
        let operations = try await documentedOperations(gw)
        XCTAssertFalse(operations.isEmpty)

        for (method, template) in operations {
            let path = template.replacingOccurrences(of: "{bundleId}", with: gw.bundleId)
                .replacingOccurrences(of: "{account}", with: "alice")
            let answer = await gw.handle(method, path, body: method == "POST" ? Array("{}".utf8) : nil)
            XCTAssertNotEqual(answer.status, 405, "\(method) \(template)")
            XCTAssertNotEqual(answer.errorCode, "NOT_FOUND", "\(method) \(template)")
            // The demo app routes no receipts by a rollout: its rollout route says so, and is known.
            if answer.errorCode == "ROLLOUT_NOT_CONFIGURED" { continue }
            XCTAssertNotEqual(answer.status, 404, "\(method) \(template): \(answer.text)")
        }
    }

    func testTheProbeCanTellAnUnknownRouteAndAWrongMethod() async throws {
        let gw = try await GatewayE2E.start(self)

        let unknown = await gw.handle("GET", "/v1/apps/\(gw.bundleId)/receipts")
        let wrongMethod = await gw.handle("DELETE", "/v1/apps/\(gw.bundleId)/verify")

        XCTAssertEqual(unknown.status, 404)
        XCTAssertEqual(unknown.errorCode, "NOT_FOUND")
        XCTAssertEqual(wrongMethod.status, 405)
        XCTAssertEqual(wrongMethod.headers["allow"], "POST")
    }

    func testTheDocumentListsExactlyTheDispatchersRoutes() async throws {
        let gw = try await GatewayE2E.start(self)
        let documented = Set(try await documentedOperations(gw).map { "\($0.method) \($0.path)" })
        let dispatched = Set(Route.all.map { "\($0.method) \($0.path)" })

        XCTAssertEqual(documented, dispatched)
        XCTAssertEqual(documented, Self.specifiedRoutes)
        for route in Route.all {
            let segments = route.path.split(separator: "/").map { $0.hasPrefix("{") ? "x" : String($0) }
            guard case .route(let matched, _) = Route.match(method: route.method, segments: segments) else {
                XCTFail("\(route.method) \(route.path) is not dispatched"); continue
            }
            XCTAssertEqual("\(matched.method) \(matched.path)", "\(route.method) \(route.path)")
            guard case .methodNotAllowed(let allowed) = Route.match(method: route.method == "GET" ? "POST" : "GET", segments: segments) else {
                XCTFail("\(route.path) takes another method"); continue
            }
            XCTAssertEqual(allowed, route.method, route.path)
        }
    }

    // The document's key requirement is the dispatcher's: every route it marks with `security`
    // refuses a request without the key (401, before any work), and every other one does not ask for it.
    func testEveryRouteTheDocumentKeysRefusesARequestWithoutTheKey() async throws {
        let gw = try await GatewayE2E.start(self)
        let document = try await gw.get("/openapi.json")
        let paths = try XCTUnwrap(document.json["paths"]?.objectValue)
        for route in Route.all {
            let operation = try XCTUnwrap(paths[route.path]?[route.method.lowercased()], route.path)
            let path = route.path.replacingOccurrences(of: "{bundleId}", with: gw.bundleId)
                .replacingOccurrences(of: "{account}", with: "alice")
            let request = HTTPRequest(method: route.method, path: path, query: route.path == "/dashboard" ? ["app": gw.bundleId] : [:],
                                      headers: ["Content-Type": "application/json"], body: Array("{}".utf8))

            let answer = await gw.harness.service.handle(request)
            let code = (try? StrictJSON().parse(answer.body))?["error"]?["code"]?.stringValue

            if operation["security"] != nil {
                XCTAssertEqual(answer.status, 401, route.path)
                XCTAssertEqual(code, "UNAUTHENTICATED", route.path)
            } else {
                XCTAssertNotEqual(code, "UNAUTHENTICATED", route.path)
            }
        }
    }
}
