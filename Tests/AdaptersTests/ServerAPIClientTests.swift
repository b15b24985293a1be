import Foundation
import XCTest
@testable import Adapters
import AppleTrust
import HTTPServer
@testable import IAPConfig
import IAPCore
import TestPKI
import UpstreamHTTP

final class ServerAPIClientTests: XCTestCase {
    private var fx: ServerAPIFixture!

    override func setUp() async throws { fx = try ServerAPIFixture() }
    override func tearDown() async throws { await fx.tearDown() }

    func testTheTokenTheServerReceivesIsAnES256AppStoreConnectJWTForTheBundleThatVerifiesWithTheKey() async throws {
        let signed = try fx.sign(ServerAPIFixture.transaction("1001"))
        fx.server.script("GET", .production, "/inApps/v1/transactions/1001", ScriptedAppStoreServer.ok(["signedTransactionInfo": .string(signed)]))
        _ = try await fx.client().getTransactionInfo(transactionId: "1001")

        let authorization = try XCTUnwrap(fx.server.requests.first?.headers["Authorization"])
        XCTAssertTrue(ScriptedAppStoreServer.tokenVerifies(authorization, key: fx.apiKey.publicKey))
        let parts = authorization.dropFirst("Bearer ".count).split(separator: ".").map(String.init)
        XCTAssertEqual(parts.count, 3)
        let header = try StrictJSON().parse(try Base64URL.decode(parts[0]))
        let claims = try StrictJSON().parse(try Base64URL.decode(parts[1]))
        XCTAssertEqual(header["alg"], .string("ES256"))
        XCTAssertEqual(header["kid"], .string(ServerAPIFixture.keyId))
        XCTAssertEqual(header["typ"], .string("JWT"))
        XCTAssertEqual(claims["aud"], .string("appstoreconnect-v1"))
        XCTAssertEqual(claims["bid"], .string(ServerAPIFixture.bundleId))
        XCTAssertEqual(claims["iss"], .string(ServerAPIFixture.issuerId))
        guard case .int(let iat)? = claims["iat"], case .int(let exp)? = claims["exp"] else { return XCTFail("iat/exp") }
        XCTAssertTrue(exp > iat && exp - iat <= 3600)
        // Another key's token must not verify: the check above is not vacuous.
        let otherToken = try AppStoreServerAPIToken(privateKeyPEM: try ECPrivateKey.generate(.p256).pkcs8PEM,
                                                    keyId: "X", issuerId: "Y", bundleId: "Z").token()
        XCTAssertFalse(ScriptedAppStoreServer.tokenVerifies("Bearer " + otherToken, key: fx.apiKey.publicKey))
    }

    func testRateLimitHonoursRetryAfterThenSucceeds() async throws {
        let signed = try fx.sign(ServerAPIFixture.transaction("1002"))
        fx.server.script("GET", .production, "/inApps/v1/transactions/1002",
                         ScriptedAppStoreServer.appleError(429, 4290000, retryAfter: 7),
                         ScriptedAppStoreServer.ok(["signedTransactionInfo": .string(signed)]))
        let info = try await fx.client().getTransactionInfo(transactionId: "1002")
        XCTAssertEqual(info.signedTransactionInfo, signed)
        XCTAssertEqual(fx.sleeps.withLock { $0 }, [.seconds(7)])
        XCTAssertEqual(fx.server.requests.count, 2)
        let tokens = fx.server.requests.compactMap { $0.headers["Authorization"] }
        XCTAssertEqual(tokens.count, 2)
        XCTAssertEqual(tokens[0], tokens[1], "the token is reused until near expiry, not re-signed per request")
    }

    func testGeneralInternalRetryableIsRetriedThenSucceeds() async throws {
        let signed = try fx.sign(ServerAPIFixture.transaction("1003"))
        fx.server.script("GET", .production, "/inApps/v1/transactions/1003",
                         ScriptedAppStoreServer.appleError(500, 5000001),
                         ScriptedAppStoreServer.ok(["signedTransactionInfo": .string(signed)]))
        let info = try await fx.client().getTransactionInfo(transactionId: "1003")
        XCTAssertEqual(info.environment, .production)
        XCTAssertEqual(fx.server.requests.count, 2)
        XCTAssertEqual(fx.sleeps.withLock { $0 }.count, 1)
    }

    func testRetriesExhaustedIsUpstreamUnavailableWithRetryAfterSeconds() async throws {
        fx.server.script("GET", .production, "/inApps/v1/transactions/1004", ScriptedAppStoreServer.appleError(503, 5000001, retryAfter: 3))
        let client = try fx.client()
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await client.getTransactionInfo(transactionId: "1004")
        }
        XCTAssertEqual(error?.code, .upstreamUnavailable)
        XCTAssertEqual(error?.retryAfterSeconds, 3)
        XCTAssertEqual(error?.retryable, true)
        XCTAssertEqual(fx.server.requests.count, 3)
    }

    func testRetriesExhaustedWithoutRetryAfterStillTellsTheCallerWhenToRetry() async throws {
        fx.server.script("GET", .production, "/inApps/v1/transactions/1005", ScriptedAppStoreServer.appleError(404, 4040002))
        let client = try fx.client()
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await client.getTransactionInfo(transactionId: "1005")
        }
        XCTAssertEqual(error?.code, .upstreamUnavailable)
        XCTAssertEqual(error?.retryAfterSeconds, client.defaultRetryAfterSeconds)
    }

    func testRateLimitThatNeverEndsIsRateLimitedWithRetryAfter() async throws {
        fx.server.script("GET", .production, "/inApps/v1/transactions/1006", ScriptedAppStoreServer.appleError(429, 4290000, retryAfter: 2))
        let client = try fx.client()
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await client.getTransactionInfo(transactionId: "1006")
        }
        XCTAssertEqual(error?.code, .rateLimited)
        XCTAssertEqual(error?.retryAfterSeconds, 2)
    }

    func testUnreachableServerIsUpstreamUnavailableAfterRetries() async throws {
        let client = AppStoreServerAPIClient(
            baseURLs: .init(production: "http://127.0.0.1:1", sandbox: "http://127.0.0.1:1"),
            tokenProvider: try AppStoreServerAPIToken(privateKeyPEM: fx.apiKey.pkcs8PEM, keyId: "K", issuerId: "I", bundleId: "B"),
            upstream: try fx.upstream(), retryPolicy: fx.retryPolicy, sleep: fx.recordingSleep)
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await client.getTransactionInfo(transactionId: "1")
        }
        XCTAssertEqual(error?.code, .upstreamUnavailable)
        XCTAssertNotNil(error?.retryAfterSeconds)
        XCTAssertEqual(fx.sleeps.withLock { $0 }.count, 2)
    }

    func testUnauthorizedIsCredentialsRejectedNamingTheKeyIdNeverTheKey() async throws {
        // The server checks tokens against fx.apiKey; this client signs with another key.
        let wrongKey = try ECPrivateKey.generate(.p256)
        let client = try fx.client(tokenProvider: try AppStoreServerAPIToken(
            privateKeyPEM: wrongKey.pkcs8PEM, keyId: "WRONGKEY99", issuerId: ServerAPIFixture.issuerId, bundleId: ServerAPIFixture.bundleId))
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await client.getTransactionInfo(transactionId: "1007")
        }
        XCTAssertEqual(error?.code, .upstreamCredentialsRejected)
        XCTAssertTrue(error?.message.contains("WRONGKEY99") == true, error?.message ?? "")
        XCTAssertTrue(error?.message.contains(ServerAPIFixture.issuerId) == true)
        XCTAssertEqual(fx.server.requests.count, 1, "a rejected key is not retried")
        let keyBody = wrongKey.pkcs8PEM.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        let everything = (error?.description ?? "") + fx.logLines.withLock { $0.joined() }
        XCTAssertFalse(everything.contains(String(keyBody.prefix(24))))
        XCTAssertFalse(everything.contains("Bearer"))
    }

    func testTransactionIdNotFoundIsTransactionNotFoundWithoutSandboxWhenNotAllowed() async throws {
        fx.server.script("GET", .production, "/inApps/v1/transactions/1008", ScriptedAppStoreServer.appleError(404, 4040010))
        let client = try fx.client()
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await client.getTransactionInfo(transactionId: "1008", order: .productionOnly)
        }
        XCTAssertEqual(error?.code, .transactionNotFound)
        XCTAssertTrue(fx.server.requests.allSatisfy { $0.path.hasPrefix("/production/") })
    }

    func testSandboxIsAskedAfterTransactionIdNotFoundWhenAllowed() async throws {
        let signed = try fx.sign(ServerAPIFixture.transaction("1009", environment: "Sandbox"))
        fx.server.script("GET", .production, "/inApps/v1/transactions/1009", ScriptedAppStoreServer.appleError(404, 4040010))
        fx.server.script("GET", .sandbox, "/inApps/v1/transactions/1009", ScriptedAppStoreServer.ok(["signedTransactionInfo": .string(signed)]))
        let info = try await fx.client().getTransactionInfo(transactionId: "1009", order: .productionThenSandbox)
        XCTAssertEqual(info.environment, .sandbox)
        XCTAssertEqual(fx.server.requests.map(\.path), ["/production/inApps/v1/transactions/1009", "/sandbox/inApps/v1/transactions/1009"])
    }

    func testOtherErrorsDoNotFallBackToSandbox() async throws {
        fx.server.script("GET", .production, "/inApps/v1/transactions/1010", ScriptedAppStoreServer.appleError(400, 4000006))
        let client = try fx.client()
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await client.getTransactionInfo(transactionId: "1010", order: .productionThenSandbox)
        }
        XCTAssertEqual(error?.code, .malformedRequest)
        XCTAssertEqual(fx.server.requests.count, 1)
    }

    func testTransactionHistoryFollowsRevisionAcrossThreePages() async throws {
        let path = "/inApps/v2/history/2001"
        var pages: [HTTPResponse] = []
        for (index, ids) in [["2001", "2002"], ["2003"], ["2004", "2005"]].enumerated() {
            let signed = try ids.map { try fx.sign(ServerAPIFixture.transaction($0)) }
            pages.append(ScriptedAppStoreServer.ok([
                "revision": .string("rev\(index + 1)"), "hasMore": .bool(index < 2), "bundleId": .string(ServerAPIFixture.bundleId),
                "environment": .string("Production"), "signedTransactions": .array(signed.map { .string($0) }),
            ]))
        }
        fx.server.script("GET", .production, path, pages[0], pages[1], pages[2])
        let history = try await fx.client().getTransactionHistory(transactionId: "2001")
        XCTAssertEqual(history.signedTransactions.count, 5)
        XCTAssertEqual(history.rawPages.count, 3)
        XCTAssertTrue(history.isComplete)
        XCTAssertEqual(history.revision, "rev3")
        let requests = fx.server.requests(to: path)
        XCTAssertEqual(requests.map { $0.query["revision"] }, [nil, "rev1", "rev2"])
        XCTAssertEqual(requests.first?.query["sort"], "ASCENDING")
    }

    func testHistoryPagingStopsAtThePageCapAndSaysSo() async throws {
        let path = "/inApps/v2/history/2101"
        for i in 1...3 {
            fx.server.script("GET", .production, path, ScriptedAppStoreServer.ok([
                "revision": .string("r\(i)"), "hasMore": .bool(true), "signedTransactions": .array([]),
            ]))
        }
        let client = AppStoreServerAPIClient(
            baseURLs: fx.server.baseURLs,
            tokenProvider: try AppStoreServerAPIToken(privateKeyPEM: fx.apiKey.pkcs8PEM, keyId: "K", issuerId: "I", bundleId: "B"),
            upstream: try fx.upstream(), maxPages: 2)
        let history = try await client.getTransactionHistory(transactionId: "2101")
        XCTAssertFalse(history.isComplete)
        XCTAssertEqual(fx.server.requests.count, 2)
    }

    func testSubscriptionStatusesAreReadIntoGroupsAndItems() async throws {
        let t = try fx.sign(ServerAPIFixture.transaction("3001", type: "Auto-Renewable Subscription"))
        let r = try fx.sign(ServerAPIFixture.renewal(original: "3001"))
        fx.server.script("GET", .production, "/inApps/v1/subscriptions/3001", ScriptedAppStoreServer.ok([
            "environment": .string("Production"), "bundleId": .string(ServerAPIFixture.bundleId),
            "data": .array([.object(["subscriptionGroupIdentifier": .string("21000000"), "lastTransactions": .array([
                .object(["status": .int(1), "originalTransactionId": .string("3001"), "signedTransactionInfo": .string(t),
                         "signedRenewalInfo": .string(r)]),
            ])])]),
        ]))
        let statuses = try await fx.client().getAllSubscriptionStatuses(transactionId: "3001")
        XCTAssertEqual(statuses.data, [SubscriptionGroupStatus(subscriptionGroupIdentifier: "21000000", lastTransactions: [
            LastTransactionsItem(status: 1, originalTransactionId: "3001", signedTransactionInfo: t, signedRenewalInfo: r),
        ])])
    }

    func testWritesUseApplesRoutesAndBodies() async throws {
        fx.server.script("PUT", .production, "/inApps/v1/transactions/consumption/4001", .init(status: 202))
        fx.server.script("PUT", .production, "/inApps/v1/transactions/4002/appAccountToken", .init(status: 200))
        fx.server.script("POST", .sandbox, "/inApps/v1/notifications/test", ScriptedAppStoreServer.ok(["testNotificationToken": .string("tok-1")]))
        fx.server.script("POST", .production, "/inApps/v1/notifications/history", ScriptedAppStoreServer.ok([
            "notificationHistory": .array([.object(["signedPayload": .string("a.b.c")])]), "hasMore": .bool(true),
            "paginationToken": .string("next"),
        ]))
        fx.server.script("GET", .production, "/inApps/v1/lookup/MQ6Z7ABCDE", ScriptedAppStoreServer.ok(["status": .int(1)]))
        let client = try fx.client()
        try await client.sendConsumptionData(transactionId: "4001", body: .object(["customerConsented": .bool(true)]))
        try await client.setAppAccountToken(originalTransactionId: "4002", appAccountToken: "7A1F0C2E-3B4D-4E5F-8A6B-7C8D9E0F1A2B")
        let test = try await client.requestTestNotification(environment: .sandbox)
        let history = try await client.getNotificationHistory(startDate: 1, endDate: 2, paginationToken: "p 2")
        let order = try await client.lookUpOrderId("MQ6Z7ABCDE")

        XCTAssertEqual(test.testNotificationToken, "tok-1")
        XCTAssertEqual(history.notificationHistory.map(\.signedPayload), ["a.b.c"])
        XCTAssertEqual(history.paginationToken, "next")
        XCTAssertEqual(order.status, 1)
        XCTAssertEqual(order.signedTransactions, [])
        let requests = fx.server.requests
        XCTAssertEqual(try StrictJSON().parse(requests[0].body), .object(["customerConsented": .bool(true)]))
        XCTAssertEqual(try StrictJSON().parse(requests[1].body), .object(["appAccountToken": .string("7a1f0c2e-3b4d-4e5f-8a6b-7c8d9e0f1a2b")]))
        XCTAssertEqual(requests[3].query["paginationToken"], "p 2")
        XCTAssertEqual(try StrictJSON().parse(requests[3].body), .object(["startDate": .int(1), "endDate": .int(2)]))
    }

    func testIdsThatAreNotDigitsNeverReachAURL() async throws {
        let client = try fx.client()
        for bad in ["../1", "1/2", "", "12a", "1?x=1", String(repeating: "1", count: 33)] {
            let error = await expectVerificationError { () async throws(VerificationError) in
                try await client.getTransactionInfo(transactionId: bad)
            }
            XCTAssertEqual(error?.code, .malformedRequest, bad)
        }
        XCTAssertEqual(fx.server.requests.count, 0)
    }

    /// Apple's fault, not the client's and not an outage: 502 UPSTREAM_INVALID_RESPONSE, not retryable.
    func testAMalformedSuccessAnswerIsUpstreamInvalidResponse() async throws {
        fx.server.script("GET", .production, "/inApps/v1/transactions/5001", .json(200, #"{"signedTransactionInfo":1}"#))
        fx.server.script("GET", .production, "/inApps/v1/transactions/5002",
                         .json(200, #"{"signedTransactionInfo":"a","signedTransactionInfo":"b"}"#))
        let client = try fx.client()
        for id in ["5001", "5002"] {
            let error = await expectVerificationError { () async throws(VerificationError) in
                try await client.getTransactionInfo(transactionId: id)
            }
            XCTAssertEqual(error?.code, .upstreamInvalidResponse, id)
            XCTAssertEqual(error?.retryable, false, id)
        }
        XCTAssertEqual(fx.server.requests.count, 2, "an unusable answer is not asked again")
    }
}
