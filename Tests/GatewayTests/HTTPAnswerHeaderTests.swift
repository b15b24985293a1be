import AppStoreSimulator
import Foundation
@testable import Gateway
import IAPCore
import TestSupport
import UpstreamHTTP
import XCTest

/// What the gateway's answers say besides their body: 405 with `Allow`, 401 with
/// `WWW-Authenticate`, `Cache-Control: no-store` on JSON, and the Bearer scheme in any case.
final class HTTPAnswerHeaderTests: XCTestCase {
    private func send(_ gw: GatewayE2E, _ method: String, _ url: String, authorization: String?,
                      body: [UInt8]? = nil) async throws -> GatewayAnswer {
        var headers: [(String, String)] = []
        if let authorization { headers.append(("Authorization", authorization)) }
        if body != nil { headers.append(("Content-Type", "application/json")) }
        let response = try await gw.client.send(UpstreamRequest(method: method, url: url, headers: headers, body: body))
        return GatewayAnswer(status: response.status, headers: response.headers, body: response.body)
    }

    func testAWrongMethodIsAnswered405MethodNotAllowedWithTheAllowedMethod() async throws {
        let gw = try await GatewayE2E.start(self)
        let cases: [(String, String, String)] = [
            ("DELETE", "\(gw.appURL)/verify", "POST"), ("GET", "\(gw.appURL)/nonces", "POST"),
            ("POST", gw.harness.gatewayURL + "/healthz", "GET"), ("PUT", "\(gw.appURL)/accounts/alice/entitlements", "GET"),
        ]
        for (method, url, allowed) in cases {
            let answer = try await gw.send(method, url)
            XCTAssertEqual(answer.status, 405, "\(method) \(url)")
            XCTAssertEqual(answer.errorCode, "METHOD_NOT_ALLOWED", "\(method) \(url)")
            XCTAssertEqual(answer.headers["allow"], allowed, "\(method) \(url)")
        }
    }

    func testTheBearerSchemeIsCaseInsensitiveAndEvery401NamesIt() async throws {
        let gw = try await GatewayE2E.start(self)
        let body = Array(#"{"account":"alice"}"#.utf8)
        for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
            let answer = try await send(gw, "POST", "\(gw.appURL)/nonces", authorization: "\(scheme) \(gw.harness.apiKey)", body: body)
            XCTAssertEqual(answer.status, 200, "\(scheme): \(answer.text)")
        }
        for authorization in [nil, "Bearer not-the-key", "Basic \(gw.harness.apiKey)", "Bearer", "Bearer \(gw.harness.apiKey)x"] {
            let answer = try await send(gw, "POST", "\(gw.appURL)/nonces", authorization: authorization, body: body)
            XCTAssertEqual(answer.status, 401, authorization ?? "no Authorization")
            XCTAssertEqual(answer.errorCode, "UNAUTHENTICATED")
            XCTAssertEqual(answer.headers["www-authenticate"], "Bearer", authorization ?? "no Authorization")
        }
    }

    func testJSONAnswersAreNeverCached() async throws {
        let gw = try await GatewayE2E.start(self)
        let answers = [
            try await gw.get("/healthz"),
            try await gw.post("nonces", ["account": "alice"]),
            try await gw.get("/v1/apps/\(gw.bundleId)/receipts"),  // 404 from the gateway
            // 413 from the HTTP server itself, before the gateway sees the request
            try await gw.send("POST", "\(gw.appURL)/verify", body: [UInt8](repeating: 0x20, count: 300 * 1024)),
        ]
        XCTAssertEqual(answers.map(\.status), [200, 200, 404, 413])
        for answer in answers {
            XCTAssertEqual(answer.headers["content-type"], "application/json", answer.text)
            XCTAssertEqual(answer.headers["cache-control"], "no-store", answer.text)
        }
    }
}
