import Foundation
@testable import Gateway
import HTTPServer
import IAPCore
import TestSupport
import XCTest

/// The order of the steps every request takes (`GatewayService`'s chain, then each route's own):
/// the app is looked up before its key is checked, the key before the `Idempotency-Key`, and the
/// shared steps (request id, metrics, the error envelope) see every refusal, whichever step made it.
final class MiddlewareOrderTests: XCTestCase {
    private func request(_ method: String, _ path: String, query: [String: String] = [:], headers: [(String, String)] = [],
                         body: String? = nil, requestId: String) -> HTTPRequest {
        var fields = HTTPHeaders()
        for (name, value) in headers { fields.add(name: name, value: value) }
        if body != nil { fields.add(name: "Content-Type", value: "application/json") }
        return HTTPRequest(method: method, path: path, query: query, headers: fields, body: Array((body ?? "").utf8),
                           requestId: requestId)
    }

    private func refusal(_ response: HTTPResponse) -> (status: Int, code: String?, requestId: String?) {
        let json = try? StrictJSON().parse(response.body)
        return (response.status, json?["error"]?["code"]?.stringValue, json?["error"]?["requestId"]?.stringValue)
    }

    // Without a key, an app that is not configured is UNKNOWN_APP on every route that names one,
    // keyed, keyed by query, and Apple's (no key); a configured one is UNAUTHENTICATED.
    func testAnUnknownAppIsRefusedBeforeTheKeyIsAskedFor() async throws {
        let gw = try await GatewayE2E.start(self)
        let body = #"{"account":"alice","transactionId":"1"}"#
        let unknown: [HTTPRequest] = [
            request("POST", "/v1/apps/com.example.nobody/verify", body: body, requestId: "unknown-verify"),
            request("POST", "/v1/apps/com.example.nobody/nonces", body: #"{"account":"alice"}"#, requestId: "unknown-nonces"),
            request("GET", "/v1/apps/com.example.nobody/accounts/alice/entitlements", requestId: "unknown-entitlements"),
            request("GET", "/dashboard", query: ["app": "com.example.nobody"], requestId: "unknown-dashboard"),
            request("POST", "/v1/notifications/com.example.nobody", body: #"{"signedPayload":"a.b.c"}"#, requestId: "unknown-notification"),
            request("POST", "/v1/retention/com.example.nobody", body: #"{"signedPayload":"a.b.c"}"#, requestId: "unknown-retention"),
        ]
        for request in unknown {
            let answer = refusal(await gw.harness.service.handle(request))
            XCTAssertEqual(answer.status, 404, request.path)
            XCTAssertEqual(answer.code, "UNKNOWN_APP", request.path)
        }

        let known = refusal(await gw.harness.service.handle(
            request("POST", "/v1/apps/\(gw.bundleId)/verify", body: body, requestId: "known-verify")))
        XCTAssertEqual(known.status, 401)
        XCTAssertEqual(known.code, "UNAUTHENTICATED")
    }

    // A malformed Idempotency-Key is judged only for a caller holding the app's key: without it the
    // answer is 401, and for an unknown app 404, never the key's 400.
    func testTheIdempotencyKeyIsJudgedAfterTheAppAndItsKey() async throws {
        let gw = try await GatewayE2E.start(self)
        let body = #"{"account":"alice"}"#
        let badKey = ("Idempotency-Key", "")
        let auth = ("Authorization", "Bearer \(gw.harness.apiKey)")

        let unknownApp = refusal(await gw.harness.service.handle(
            request("POST", "/v1/apps/com.example.nobody/nonces", headers: [badKey, auth], body: body, requestId: "r1")))
        let noKey = refusal(await gw.harness.service.handle(
            request("POST", "/v1/apps/\(gw.bundleId)/nonces", headers: [badKey], body: body, requestId: "r2")))
        let keyed = refusal(await gw.harness.service.handle(
            request("POST", "/v1/apps/\(gw.bundleId)/nonces", headers: [badKey, auth], body: body, requestId: "r3")))

        XCTAssertEqual([unknownApp.status, noKey.status, keyed.status], [404, 401, 400])
        XCTAssertEqual([unknownApp.code, noKey.code, keyed.code], ["UNKNOWN_APP", "UNAUTHENTICATED", "MALFORMED_REQUEST"])
    }

    // Whichever step refuses (routing, the app lookup, the key, the Idempotency-Key, the endpoint),
    // the answer carries the request's id, and metrics count it by route and the status sent.
    func testEveryRefusalCarriesTheRequestIdAndIsCounted() async throws {
        let gw = try await GatewayE2E.start(self)
        let auth = ("Authorization", "Bearer \(gw.harness.apiKey)")
        let verify = "/v1/apps/\(gw.bundleId)/verify"
        let cases: [(HTTPRequest, status: Int, code: String)] = [
            (request("GET", "/v1/nowhere", requestId: "req-not-found"), 404, "NOT_FOUND"),
            (request("DELETE", verify, requestId: "req-method"), 405, "METHOD_NOT_ALLOWED"),
            (request("POST", "/v1/apps/com.example.nobody/verify", body: "{}", requestId: "req-app"), 404, "UNKNOWN_APP"),
            (request("POST", verify, body: "{}", requestId: "req-auth"), 401, "UNAUTHENTICATED"),
            (request("POST", verify, headers: [auth, ("Idempotency-Key", "\u{7F}")], body: "{}", requestId: "req-idem"), 400,
             "MALFORMED_REQUEST"),
            (request("POST", verify, headers: [auth], body: #"{"account":"alice","signedTransaction":"a.b.c"}"#,
                     requestId: "req-evidence"), 422, "MALFORMED_BASE64"),
        ]
        for (request, status, code) in cases {
            let answer = refusal(await gw.harness.service.handle(request))
            XCTAssertEqual(answer.status, status, request.requestId)
            XCTAssertEqual(answer.code, code, request.requestId)
            XCTAssertEqual(answer.requestId, request.requestId)
        }

        let metrics = String(decoding: await gw.harness.service.handle(request("GET", "/metrics", requestId: "m")).body,
                             as: UTF8.self)
        for series in [#"route="not_found",status="404""#, #"route="method_not_allowed",status="405""#,
                       #"route="verify",status="404""#, #"route="verify",status="401""#, #"route="verify",status="400""#,
                       #"route="verify",status="422""#] {
            XCTAssertTrue(metrics.contains("iapgw_http_requests_total{\(series)} 1"), series)
        }
    }

    // The refusal's log line names the route and code, and carries the request id the answer does.
    func testTheRefusalIsLoggedUnderTheRequestsId() async throws {
        let logs = LogCapture()
        let gw = try await GatewayE2E.start(self, logger: logs.logger)
        _ = await gw.harness.service.handle(request("POST", "/v1/apps/\(gw.bundleId)/verify", body: "{}",
                                                    requestId: "req-logged-401"))
        let line = try XCTUnwrap(logs.captured.first { $0.contains("request_refused") && $0.contains("req-logged-401") })
        XCTAssertTrue(line.contains("UNAUTHENTICATED"), line)
        XCTAssertTrue(line.contains("verify"), line)
    }
}
