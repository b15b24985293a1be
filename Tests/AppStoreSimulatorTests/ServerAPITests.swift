import AppleTrust
@testable import AppStoreSimulator
import Foundation
import IAPCore
import UpstreamHTTP
import XCTest

final class ServerAPITests: XCTestCase {
    func testMissingExpiredOrWrongKeyTokensAre401() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let p = try f.oneTime("com.example.sim.pro", type: .nonConsumable)
        let path = "/inApps/v1/transactions/\(p.transactionId)"
        var r = try await f.serverAPI(path, token: nil)
        XCTAssertEqual(r.status, 401)
        r = try await f.serverAPI(path, token: try f.token(now: Date().addingTimeInterval(-7200)))
        XCTAssertEqual(r.status, 401)
        r = try await f.serverAPI(path, token: try f.token(keyPEM: try ECPrivateKey.generate(.p256).pkcs8PEM))
        XCTAssertEqual(r.status, 401)
        r = try await f.serverAPI(path, token: try f.token())
        XCTAssertEqual(r.status, 200)
    }

    func testTransactionInfoIsJWSThatVerifiesAgainstSimulatorRoot() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let p = try f.subscription(offer: .promotional(id: "promo1", .payUpFront))
        let r = try await f.serverAPI("/inApps/v1/transactions/\(p.transactionId)", token: try f.token())
        XCTAssertEqual(r.status, 200)
        let jws = try XCTUnwrap(try f.json(r)["signedTransactionInfo"]?.stringValue)
        let t = try f.verifier().verifyAndDecodeTransaction(jws)
        XCTAssertEqual(t.transactionId, p.transactionId)
        XCTAssertEqual(t.originalTransactionId, p.originalTransactionId)
        XCTAssertEqual(t.productId, "com.example.sim.monthly")
        XCTAssertEqual(t.subscriptionGroupIdentifier, "21000001")
        XCTAssertEqual(t.type, .autoRenewable)
        XCTAssertEqual(t.environment, .production)
        XCTAssertEqual(t.offerType, .promotional)
        XCTAssertEqual(t.offerIdentifier, "promo1")
        XCTAssertEqual(t.price, 9_990)
        XCTAssertEqual(t.currency, "USD")
        XCTAssertNotNil(t.expiresDate)
        // The purchase's own signed transaction verifies too.
        XCTAssertEqual(try f.verifier().verifyAndDecodeTransaction(p.signedTransaction).transactionId, p.transactionId)
    }

    /// A benchmark pool's purchase: no receipt signed, but the same transaction as `purchase`
    /// records (the Server API knows it) and a signed transaction that verifies against the root.
    func testAPurchaseOfOnlyItsSignedTransactionIsRecordedAndVerifies() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let jws = try f.sim.purchaseSignedTransaction(PurchaseRequest(
            bundleId: SimulatorFixture.bundleId, productId: "com.example.sim.pro", type: .nonConsumable, owner: "device-pool-1"))
        let t = try f.verifier().verifyAndDecodeTransaction(jws)
        XCTAssertEqual(t.productId, "com.example.sim.pro")
        XCTAssertEqual(t.type, .nonConsumable)
        let r = try await f.serverAPI("/inApps/v1/transactions/\(t.transactionId)", token: try f.token())
        XCTAssertEqual(r.status, 200)
        let again = try f.verifier().verifyAndDecodeTransaction(try XCTUnwrap(try f.json(r)["signedTransactionInfo"]?.stringValue))
        XCTAssertEqual(again.transactionId, t.transactionId)
        XCTAssertEqual(again.originalTransactionId, t.originalTransactionId)
    }

    func testSandboxTransactionAskedOnProductionIs4040010AndFoundOnSandbox() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let p = try f.oneTime("com.example.sim.pro", type: .nonConsumable, environment: .sandbox)
        var r = try await f.serverAPI("/inApps/v1/transactions/\(p.transactionId)", token: try f.token())
        XCTAssertEqual(r.status, 404)
        XCTAssertEqual(try f.json(r)["errorCode"], .int(4040010))
        r = try await f.serverAPI("/inApps/v1/transactions/\(p.transactionId)", environment: "sandbox", token: try f.token())
        XCTAssertEqual(r.status, 200)
        r = try await f.serverAPI("/inApps/v1/transactions/abc", token: try f.token())
        XCTAssertEqual(r.status, 400)
        XCTAssertEqual(try f.json(r)["errorCode"], .int(4000006))
    }

    func testHistoryPagesWithRevisionAndHasMore() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let first = try f.subscription()
        for _ in 0..<24 { _ = try f.sim.renew(originalTransactionId: first.originalTransactionId) }
        let token = try f.token()
        var seen: [String] = []
        var revision: String? = nil
        var pages = 0
        repeat {
            let query = revision.map { "?revision=\($0)" } ?? ""
            let r = try await f.serverAPI("/inApps/v2/history/\(first.transactionId)\(query)", token: token)
            XCTAssertEqual(r.status, 200)
            let json = try f.json(r)
            let signed = try XCTUnwrap(json["signedTransactions"]?.arrayValue)
            seen += try signed.map { try f.verifier().verifyAndDecodeTransaction(try XCTUnwrap($0.stringValue)).transactionId }
            revision = json["revision"]?.stringValue
            pages += 1
            if json["hasMore"] != .bool(true) { break }
        } while pages < 5
        XCTAssertEqual(pages, 2)
        XCTAssertEqual(seen.count, 25)
        XCTAssertEqual(Set(seen).count, 25)
    }

    func testRefundShowsRevocationDateInJWSAndRefundLookup() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let p = try f.oneTime("com.example.sim.pro", type: .nonConsumable)
        let refunded = try f.sim.refund(transactionId: p.transactionId, reason: 1)
        let t = try f.verifier().verifyAndDecodeTransaction(refunded.signedTransaction)
        XCTAssertNotNil(t.revocationDate)
        XCTAssertEqual(t.revocationReason, .appIssue)
        let r = try await f.serverAPI("/inApps/v2/refund/lookup/\(p.transactionId)", token: try f.token())
        XCTAssertEqual(try f.json(r)["signedTransactions"]?.arrayValue?.count, 1)
    }

    func testSubscriptionStatusesCarrySignedTransactionAndRenewalInfo() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let p = try f.subscription()
        _ = try f.sim.expire(originalTransactionId: p.originalTransactionId, intent: 1)
        let r = try await f.serverAPI("/inApps/v1/subscriptions/\(p.transactionId)", token: try f.token())
        let json = try f.json(r)
        let group = try XCTUnwrap(json["data"]?.arrayValue?.first)
        XCTAssertEqual(group["subscriptionGroupIdentifier"], .string("21000001"))
        let last = try XCTUnwrap(group["lastTransactions"]?.arrayValue?.first)
        XCTAssertEqual(last["status"], .int(2))
        let renewal = try f.verifier().verifyAndDecodeRenewalInfo(try XCTUnwrap(last["signedRenewalInfo"]?.stringValue))
        XCTAssertEqual(renewal.originalTransactionId, p.originalTransactionId)
        XCTAssertNotNil(try f.verifier().verifyAndDecodeTransaction(try XCTUnwrap(last["signedTransactionInfo"]?.stringValue)))
    }

    func testInjected5xxThenSuccessAnd429WithRetryAfter() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let p = try f.oneTime("com.example.sim.pro", type: .nonConsumable)
        let path = "/inApps/v1/transactions/\(p.transactionId)"
        let token = try f.token()
        f.sim.faults.failNext(2)
        for _ in 0..<2 {
            let r = try await f.serverAPI(path, token: token)
            XCTAssertEqual(r.status, 500)
            XCTAssertEqual(try f.json(r)["errorCode"], .int(5000001))
        }
        let recovered = try await f.serverAPI(path, token: token)
        XCTAssertEqual(recovered.status, 200)

        f.sim.faults.rateLimitNext(1, retryAfterSeconds: 7, scope: .production)
        let limited = try await f.serverAPI(path, token: token)
        XCTAssertEqual(limited.status, 429)
        XCTAssertEqual(limited.headers["retry-after"] ?? limited.headers["Retry-After"], "7")
        XCTAssertEqual(try f.json(limited)["errorCode"], .int(4290000))
        // Scoped to production: sandbox is unaffected even while production is limited.
        f.sim.faults.rateLimitNext(1, scope: .production)
        let sandbox = try await f.serverAPI(path, environment: "sandbox", token: token)
        XCTAssertEqual(sandbox.status, 404)
    }

    func testSeededFailureRateIsReproducible() {
        func pattern() -> [Bool] {
            let faults = FaultInjector()
            faults.setFailureRate(0.5, seed: 42)
            return (0..<32).map { _ in faults.decide(for: .production).action == .fail }
        }
        let a = pattern()
        XCTAssertEqual(a, pattern())
        XCTAssertTrue(a.contains(true) && a.contains(false))
    }

    func testNotificationIsSignedAndRecordedInHistory() async throws {
        let f = try await SimulatorFixture()
        addTeardownBlock { await f.stop() }
        let p = try f.subscription()
        let start = Int64(Date().timeIntervalSince1970 * 1000) - 1000
        let payload = try await f.sim.sendNotification(type: "DID_RENEW", purchase: p, to: nil)
        let decoded = try f.verifier().verifyAndDecodeNotification(payload)
        XCTAssertEqual(decoded.notificationType, NotificationType(rawValue: "DID_RENEW"))
        let r = try await f.serverAPI("/inApps/v1/notifications/history", method: "POST", token: try f.token(),
                                      body: .object(["startDate": .int(start), "endDate": .int(start + 60_000)]))
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(try f.json(r)["notificationHistory"]?.arrayValue?.first?["signedPayload"], .string(payload))
    }
}
