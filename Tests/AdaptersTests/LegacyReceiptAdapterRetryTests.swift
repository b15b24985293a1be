import Foundation
import HTTPServer
@testable import IAPConfig
import IAPCore
import UpstreamHTTP
import XCTest
@testable import Adapters

/// Retries: Apple's temporary statuses, HTTP 429/5xx, HTML outage pages, unreachable hosts. Waits are
/// recorded, not slept.
final class LegacyReceiptAdapterRetryTests: LegacyAdapterTestCase {
    func testTemporaryStatusTwiceThenValidSucceedsWithExactlyThreeCalls() async throws {
        let server = try serve { _, _, call in
            call <= 2 ? LegacyVerifyReceiptServer.status(21005) : .json(200, F.validAnswer())
        }
        let outcome = try await adapter(server.endpoints)
            .verify(.appReceipt(base64: F.receipt, nonce: nil), account: "account-1", for: F.app())
        XCTAssertEqual(outcome.transactions.count, 3)
        XCTAssertEqual(server.requests.count, 3)
        XCTAssertEqual(sleeps.all, [.milliseconds(100), .milliseconds(200)])
    }

    func testTemporaryStatusForeverIsUpstreamUnavailableAfterMaxAttempts() async throws {
        for status in [21005, 21009, 21100, 21199] {
            let server = try serve { _, _, _ in LegacyVerifyReceiptServer.status(status) }
            let error = await refusal(try adapter(server.endpoints, maxAttempts: 4))
            XCTAssertEqual(error?.code, .upstreamUnavailable, "status \(status)")
            XCTAssertEqual(error?.retryable, true)
            XCTAssertEqual(server.requests.count, 4, "status \(status)")
        }
    }

    func testIsRetryableFlagMakesAnOtherwiseFinalStatusRetried() async throws {
        let server = try serve { _, _, call in
            call == 1 ? LegacyVerifyReceiptServer.status(21002, retryable: true) : .json(200, F.validAnswer())
        }
        _ = try await adapter(server.endpoints)
            .verify(.appReceipt(base64: F.receipt, nonce: nil), account: "account-1", for: F.app())
        XCTAssertEqual(server.requests.count, 2)
    }

    func testRateLimitHonoursRetryAfterAndCarriesItInTheError() async throws {
        let server = try serve { _, _, _ in
            LegacyVerifyReceiptServer.json(#"{"error": "slow down"}"#, status: 429, headers: [("Retry-After", "7")])
        }
        let error = await refusal(try adapter(server.endpoints, maxAttempts: 2))
        XCTAssertEqual(error?.code, .rateLimited)
        XCTAssertEqual(error?.retryAfterSeconds, 7)
        XCTAssertEqual(sleeps.all, [.seconds(7)])
        XCTAssertEqual(server.requests.count, 2)
    }

    func testRetryAfterBeyondTheBudgetStopsAtOnceAndCarriesTheWait() async throws {
        let server = try serve { _, _, _ in
            LegacyVerifyReceiptServer.json("{}", status: 429, headers: [("Retry-After", "3600")])
        }
        let error = await refusal(try adapter(server.endpoints, budget: .seconds(10)))
        XCTAssertEqual(error?.code, .rateLimited)
        XCTAssertEqual(error?.retryAfterSeconds, 3600)
        XCTAssertEqual(server.requests.count, 1)
        XCTAssertEqual(sleeps.all, [])
    }

    func testServerErrorThenValidSucceeds() async throws {
        let server = try serve { _, _, call in
            call == 1 ? HTTPResponse(status: 503) : .json(200, F.validAnswer())
        }
        _ = try await adapter(server.endpoints)
            .verify(.appReceipt(base64: F.receipt, nonce: nil), account: "account-1", for: F.app())
        XCTAssertEqual(server.requests.count, 2)
    }

    func testHTMLOutagePageIsRetriedThenUpstreamUnavailable() async throws {
        let server = try serve { _, _, _ in
            HTTPResponse(status: 200, headers: [("Content-Type", "text/html")],
                         body: Array("<html><body>Service Unavailable</body></html>".utf8))
        }
        let error = await refusal(try adapter(server.endpoints))
        XCTAssertEqual(error?.code, .upstreamUnavailable)
        XCTAssertFalse(error?.message.contains("Service Unavailable") ?? true, "the body never reaches the error")
        XCTAssertEqual(server.requests.count, 3)
    }

    func testAnswerWithADuplicateKeyIsNeverTrusted() async throws {
        let server = try serve { _, _, _ in
            LegacyVerifyReceiptServer.json(#"{"status": 21003, "status": 0}"#)
        }
        let error = await refusal(try adapter(server.endpoints))
        XCTAssertEqual(error?.code, .upstreamUnavailable)
    }

    func testUnreachableUpstreamIsUpstreamUnavailableAfterMaxAttempts() async throws {
        // Port 1 on loopback: nothing listens, the connection is refused at once.
        let endpoints = EnvironmentURLs(production: "http://127.0.0.1:1/verifyReceipt",
                                               sandbox: "http://127.0.0.1:1/verifyReceipt")
        let error = await refusal(try adapter(endpoints))
        XCTAssertEqual(error?.code, .upstreamUnavailable)
        XCTAssertEqual(sleeps.all.count, 2, "three attempts, two waits")
    }

    func testPlainHTTPToANonLoopbackHostIsAConfigurationError() async throws {
        let endpoints = EnvironmentURLs(production: "http://buy.itunes.apple.com/verifyReceipt",
                                               sandbox: "http://sandbox.itunes.apple.com/verifyReceipt")
        let error = await refusal(try adapter(endpoints))
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertEqual(sleeps.all.count, 0)
    }
}
