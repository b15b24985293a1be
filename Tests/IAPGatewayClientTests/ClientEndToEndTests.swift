import AppStoreSimulator
import Foundation
import HTTPServer
import IAPGatewayClient
import XCTest

/// IAPGatewayClient against a running gateway and simulator over real HTTP (URLSession).
final class ClientEndToEndTests: XCTestCase {
    func testReceiptFlowGrantsOnceAndASpentNonceIsRefusedWithTheGatewaysCode() async throws {
        let gw = try await ClientDeployment.start(self)
        let client = try gw.client()
        let purchase = try gw.buy(owner: "device-alice")

        let verification = try await client.verifyReceipt(purchase.receiptBase64, account: "alice")
        XCTAssertEqual(verification.verdict, .granted)
        XCTAssertEqual(verification.newlyGranted, [purchase.transactionId])
        XCTAssertEqual(verification.transactions.first?.productId, ClientDeployment.monthly)
        XCTAssertEqual(verification.entitlements.map(\.grantsAccess), [true])

        let nonce = try await client.nonce(account: "alice")
        XCTAssertGreaterThan(nonce.expiresAt, Date())
        _ = try await client.verify(account: "alice", evidence: .receipt(purchase.receiptBase64, nonce: nonce.nonce))
        let again = await refusal { () async throws(IAPGatewayError) in
            try await client.verify(account: "alice", evidence: .receipt(purchase.receiptBase64, nonce: nonce.nonce))
        }
        XCTAssertEqual(again?.kind, .refused)
        XCTAssertEqual(again?.code, "NONCE_REUSED")
        XCTAssertEqual(again?.status, 422)
        XCTAssertEqual(again?.retryable, false)
        XCTAssertNotNil(again?.requestId)
    }

    func testTransactionIdAndSignedTransactionWithTheClientsAppAccountToken() async throws {
        let gw = try await ClientDeployment.start(self)
        let client = try gw.client()
        let bought = try gw.buy(ClientDeployment.removeAds, owner: "device-bob")

        let first = try await client.verify(account: "bob", evidence: .transactionId(bought.transactionId))
        XCTAssertEqual(first.verdict, .granted)
        XCTAssertEqual(first.adapter, .serverAPI)
        XCTAssertEqual(first.newlyGranted, [bought.transactionId])
        let repeated = try await client.verify(account: "bob", evidence: .signedTransaction(bought.signedTransaction))
        XCTAssertEqual(repeated.newlyGranted, [])
        XCTAssertEqual(repeated.alreadyGranted, [bought.transactionId])

        // The token the client derives is the one the gateway accepts for that account, and only for it.
        let token = client.appAccountToken(account: "carol")
        let tokened = try gw.buy(owner: "device-carol", appAccountToken: token)
        let carol = try await client.verify(account: "carol", evidence: .signedTransaction(tokened.signedTransaction))
        XCTAssertEqual(carol.verdict, .granted)
        XCTAssertEqual(carol.transactions.first?.appAccountToken?.lowercased(), token.uuidString.lowercased())
        let other = try gw.buy(owner: "device-dave", appAccountToken: token)
        let dave = await refusal { () async throws(IAPGatewayError) in
            try await client.verify(account: "dave", evidence: .signedTransaction(other.signedTransaction))
        }
        XCTAssertEqual(dave?.code, "APP_ACCOUNT_TOKEN_MISMATCH")
    }

    func testEntitlementsOfAnAccountWhoseNameNeedsPercentEncoding() async throws {
        let gw = try await ClientDeployment.start(self)
        let client = try gw.client()
        let account = "user 7/ä?#"
        let bought = try gw.buy(ClientDeployment.removeAds, owner: "device-7")
        _ = try await client.verify(account: account, evidence: .transactionId(bought.transactionId))

        let held = try await client.entitlements(account: account)
        XCTAssertEqual(held.map(\.productId), [ClientDeployment.removeAds])
        XCTAssertEqual(held.first?.grantsAccess, true)
        XCTAssertEqual(held.first?.originalTransactionId, bought.originalTransactionId)
        let nobody = try await client.entitlements(account: "user 7")
        XCTAssertEqual(nobody, [])
    }

    func testHistoryShowsTheAccountsAttemptsAndItsPurchaseChain() async throws {
        let gw = try await ClientDeployment.start(self)
        let client = try gw.client()
        let account = "user 8/ä?#"
        let bought = try gw.buy(ClientDeployment.removeAds, owner: "device-8")
        _ = try await client.verify(account: account, evidence: .transactionId(bought.transactionId))
        let missing = await refusal { () async throws(IAPGatewayError) in
            try await client.verify(account: account, evidence: .transactionId("9999999999999"))
        }
        XCTAssertNotNil(missing?.code)

        let history = try await client.history(account: account)
        XCTAssertEqual(history.attempts.map(\.verdict), ["refused", "granted"], "newest first")
        XCTAssertEqual(history.attempts.first?.code, missing?.code)
        XCTAssertEqual(history.attempts.first?.requestId, missing?.requestId)
        XCTAssertEqual(history.attempts.last?.transactionIds, [bought.transactionId])
        XCTAssertEqual(history.attempts.last?.evidenceSHA256Prefix.count, 16)
        XCTAssertEqual(history.chains.map(\.owner), [account])
        XCTAssertEqual(history.chains.first?.grants.map(\.transactionId), [bought.transactionId])
        XCTAssertEqual(history.chains.first?.entitlement?.grantsAccess, true)
        XCTAssertFalse(history.truncated)

        let last = try await client.history(account: account, limit: 1)
        XCTAssertEqual(last.attempts.map(\.verdict), ["refused"])
        XCTAssertTrue(last.truncated)
        let later = try await client.history(account: account, since: Date().addingTimeInterval(3_600))
        XCTAssertEqual(later.attempts, [])
    }

    func testAVerificationWhoseAnswerWasLostIsRetriedUnderItsKeyAndStillSaysNewlyGranted() async throws {
        let gw = try await ClientDeployment.start(self)
        let transport = LosesFirstAnswer()
        let client = try gw.client(transport: transport)
        let bought = try gw.buy(ClientDeployment.removeAds, owner: "device-lost")
        let verification = try await client.verify(account: "lou", evidence: .transactionId(bought.transactionId))
        XCTAssertEqual(verification.newlyGranted, [bought.transactionId], "the grant of the lost answer is reported")
        let keys = transport.keys
        XCTAssertEqual(keys.count, 2, "one attempt lost, one retry")
        XCTAssertEqual(Set(keys).count, 1, "the retry carries the first attempt's key")
        XCTAssertEqual(transport.replayed, ["true"])
        // A new call is a new key: the gateway says what it knows now.
        let again = try await client.verify(account: "lou", evidence: .transactionId(bought.transactionId))
        XCTAssertEqual(again.alreadyGranted, [bought.transactionId])
        XCTAssertNotEqual(transport.keys.last, keys.first)
    }

    func testSupportFindsAnOrdersPurchaseItsOwnerAndTheOwnersHistory() async throws {
        let gw = try await ClientDeployment.start(self)
        let client = try gw.client()
        let bought = try gw.buy(ClientDeployment.removeAds, owner: "device-ola")
        _ = try await client.verify(account: "ola", evidence: .transactionId(bought.transactionId))
        let order = try await client.order(orderId: bought.orderId)
        XCTAssertEqual(order.orderId, bought.orderId)
        XCTAssertEqual(order.transactions.map(\.transaction.transactionId), [bought.transactionId])
        XCTAssertEqual(order.transactions.map(\.owner), ["ola"])
        XCTAssertEqual(order.accounts.map(\.account), ["ola"])
        XCTAssertEqual(order.accounts.first?.chains.map(\.originalTransactionId), [bought.transactionId])
        let missing = await refusal { () async throws(IAPGatewayError) in try await client.order(orderId: "MZZZZZZZZZ") }
        XCTAssertEqual(missing?.code, "ORDER_NOT_FOUND")
        XCTAssertEqual(missing?.status, 404)
    }

    func testWrongKeyIsUnauthenticatedAndNotRetryable() async throws {
        let gw = try await ClientDeployment.start(self)
        let client = try gw.client(apiKey: "not-the-key")
        let refused = await refusal { () async throws(IAPGatewayError) in try await client.entitlements(account: "alice") }
        XCTAssertEqual(refused?.code, "UNAUTHENTICATED")
        XCTAssertEqual(refused?.status, 401)
        XCTAssertEqual(refused?.retryable, false)
    }

    func testAppleRateLimitIsRetryableWithTheGatewaysRetryAfter() async throws {
        let gw = try await ClientDeployment.start(self)
        let client = try gw.client()
        let bought = try gw.buy(ClientDeployment.removeAds, owner: "device-bob")
        gw.harness.simulator.faults.rateLimitNext(10, retryAfterSeconds: 120)

        let refused = await refusal { () async throws(IAPGatewayError) in
            try await client.verify(account: "bob", evidence: .transactionId(bought.transactionId))
        }
        XCTAssertEqual(refused?.code, "RATE_LIMITED")
        XCTAssertEqual(refused?.status, 503)
        XCTAssertEqual(refused?.retryable, true)
        XCTAssertEqual(refused?.retryAfter, .seconds(120))
    }

    func testTimeoutHoldsAgainstAGatewayThatNeverAnswers() async throws {
        let silent = try HTTPServer(configuration: HTTPServerConfiguration(port: 0, connectionTimeoutSeconds: 60)) { _ in
            try? await Task.sleep(for: .seconds(30))
            return .json(200, "{}")
        }
        try silent.start()
        defer { Task { await silent.shutdown(gracePeriod: .zero) } }
        let client = try IAPGatewayClient(baseURL: URL(string: "http://127.0.0.1:\(silent.port)")!,
                                          bundleId: "com.example.demo", apiKey: "k", timeout: .seconds(1))
        let started = ContinuousClock.now
        let refused = await refusal { () async throws(IAPGatewayError) in try await client.nonce(account: "alice") }
        XCTAssertEqual(refused?.kind, .timedOut, "\(String(describing: refused)) \(refused?.detail ?? "")")
        XCTAssertEqual(refused?.code, "TIMEOUT")
        XCTAssertEqual(refused?.retryable, true)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5))
    }

    func testAProxysErrorPageIsAnUnexpectedAnswerRetryableOnlyWhenItSaysTheGatewayIsDown() async throws {
        for (status, retryable) in [(502, true), (504, true), (403, false)] {
            let proxy = try HTTPServer(configuration: HTTPServerConfiguration(port: 0)) { _ in
                HTTPResponse(status: status, headers: [("Content-Type", "text/html"), ("Retry-After", "7")],
                             body: Array("<html>Bad Gateway</html>".utf8))
            }
            try proxy.start()
            // Shorter than the proxy's Retry-After: the client gives up at once instead of waiting it out.
            let client = try IAPGatewayClient(baseURL: URL(string: "http://127.0.0.1:\(proxy.port)")!,
                                              bundleId: "com.example.demo", apiKey: "k", timeout: .seconds(5))
            let refused = await refusal { () async throws(IAPGatewayError) in try await client.nonce(account: "alice") }
            await proxy.shutdown(gracePeriod: .zero)
            XCTAssertEqual(refused?.kind, .unexpectedAnswer, "\(status)")
            XCTAssertEqual(refused?.status, status)
            XCTAssertEqual(refused?.retryable, retryable, "\(status)")
            XCTAssertEqual(refused?.retryAfter, .seconds(7))
        }
    }

    func testARedirectIsNotFollowedSoTheKeyStaysWithTheGateway() async throws {
        let seen = HeaderLog()
        let elsewhere = try HTTPServer(configuration: HTTPServerConfiguration(port: 0)) { request in
            seen.add(request.headers.values(for: "Authorization"))
            return .json(200, #"{"nonce":"n","expiresAt":1}"#)
        }
        try elsewhere.start()
        let redirecting = try HTTPServer(configuration: HTTPServerConfiguration(port: 0)) { _ in
            HTTPResponse(status: 307, headers: [("Location", "http://localhost:\(elsewhere.port)/v1/apps/x/nonces")], body: [])
        }
        try redirecting.start()
        let client = try IAPGatewayClient(baseURL: URL(string: "http://127.0.0.1:\(redirecting.port)")!,
                                          bundleId: "com.example.demo", apiKey: "the-key")
        let refused = await refusal { () async throws(IAPGatewayError) in try await client.nonce(account: "alice") }
        await redirecting.shutdown(gracePeriod: .zero)
        await elsewhere.shutdown(gracePeriod: .zero)
        XCTAssertEqual(refused?.kind, .unexpectedAnswer)
        XCTAssertEqual(refused?.status, 307)
        XCTAssertEqual(seen.all, [], "the redirect's target was never asked")
    }

    func testPlainHTTPToAnotherHostIsRefusedUnlessAllowed() throws {
        XCTAssertThrowsError(try IAPGatewayClient(baseURL: URL(string: "http://gateway.internal:8080")!,
                                                  bundleId: "com.example.demo", apiKey: "k")) { error in
            XCTAssertEqual((error as? IAPGatewayError)?.code, "INVALID_REQUEST")
        }
        XCTAssertNoThrow(try IAPGatewayClient(baseURL: URL(string: "http://gateway.internal:8080")!,
                                              bundleId: "com.example.demo", apiKey: "k", allowPlainHTTP: true))
        XCTAssertNoThrow(try IAPGatewayClient(baseURL: URL(string: "https://gateway.internal")!,
                                              bundleId: "com.example.demo", apiKey: "k"))
    }
}

final class HeaderLog: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String] = []
    func add(_ more: [String]) { lock.lock(); values += more; lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return values }
}

/// URLSession, except that the first answer is lost on its way back (a proxy that dropped the
/// connection after the gateway answered): the client sees a transport failure.
final class LosesFirstAnswer: IAPGatewayTransport, @unchecked Sendable {
    private let inner = URLSessionTransport()
    private let lock = NSLock()
    private var sent: [String] = []
    private var replays: [String] = []

    var keys: [String] { lock.withLock { sent } }
    var replayed: [String] { lock.withLock { replays } }

    func send(_ request: IAPGatewayHTTPRequest) async throws -> IAPGatewayHTTPResponse {
        let response = try await inner.send(request)
        let first = lock.withLock { () -> Bool in
            sent.append(request.headers["Idempotency-Key"] ?? "")
            if let replayed = response.headers["idempotent-replayed"] { replays.append(replayed) }
            return sent.count == 1
        }
        if first { throw URLError(.networkConnectionLost) }
        return response
    }
}
