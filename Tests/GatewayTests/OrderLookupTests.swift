import AppStoreSimulator
import Foundation
import IAPCore
import TestSupport
import XCTest

/// The support desk's order look-up over real HTTP against the simulator: a customer quotes the
/// order ID of Apple's receipt e-mail, support sees Apple's transactions of the order, who owns each
/// here and that account's history (`GET …/orders/{orderId}`, `iapgw audit --order-id`).
final class OrderLookupTests: XCTestCase {
    func testAnOrderAnswersItsTransactionsTheirOwnerAndTheOwnersHistory() async throws {
        let gw = try await GatewayE2E.start(self)
        let bought = try gw.buy(GatewayE2E.removeAds, owner: "device-olive")
        let claimed = try await gw.verifyTransactionId(bought.transactionId, account: "olive")
        XCTAssertEqual(claimed.status, 200, claimed.text)

        let answer = try await gw.send("GET", "\(gw.appURL)/orders/\(bought.orderId)")

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.json["orderId"]?.stringValue, bought.orderId)
        XCTAssertEqual(answer.json["environment"], "Production")
        let transactions = try XCTUnwrap(answer.json["transactions"]?.arrayValue)
        XCTAssertEqual(transactions.compactMap { $0["transaction"]?["transactionId"]?.stringValue }, [bought.transactionId])
        XCTAssertEqual(transactions.first?["transaction"]?["productId"]?.stringValue, GatewayE2E.removeAds)
        XCTAssertEqual(transactions.first?["owner"], "olive")
        let accounts = try XCTUnwrap(answer.json["accounts"]?.arrayValue)
        XCTAssertEqual(accounts.compactMap { $0["account"]?.stringValue }, ["olive"])
        XCTAssertEqual(accounts.first?["attempts"]?.arrayValue?.compactMap { $0["verdict"]?.stringValue }, ["granted"])
        XCTAssertEqual(accounts.first?["chains"]?.arrayValue?.compactMap { $0["originalTransactionId"]?.stringValue },
                       [bought.originalTransactionId])

        // `iapgw audit --order-id` asks Apple and the same ledger, and answers the same way.
        let audit = try ProcessRun.run(GatewayProcess.binary.path, [
            "audit", "--app", gw.bundleId, "--order-id", bought.orderId,
            "--config", gw.harness.directory.path, "--mappings", GatewayProcess.mappings.path])
        XCTAssertEqual(audit.status, 0, audit.stderr)
        let printed = try StrictJSON().parse(Array(audit.stdout.utf8))
        XCTAssertEqual(printed["transactions"]?.arrayValue?.first?["owner"], "olive")
        XCTAssertEqual(printed["accounts"]?.arrayValue?.first?["account"], "olive")
        let both = try ProcessRun.run(GatewayProcess.binary.path, [
            "audit", "--app", gw.bundleId, "--order-id", bought.orderId, "--account", "olive"])
        XCTAssertEqual(both.status, 2, "exactly one subject")
    }

    func testAnOrderNobodyClaimedHereHasNoOwnerAndASandboxOrderIsFoundThere() async throws {
        let gw = try await GatewayE2E.start(self)
        let bought = try gw.buy(GatewayE2E.removeAds, owner: "device-pia", environment: .sandbox)

        let answer = try await gw.send("GET", "\(gw.appURL)/orders/\(bought.orderId)?limit=5")

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.json["environment"], "Sandbox", "Production says invalid, so Sandbox is asked")
        let transactions = try XCTUnwrap(answer.json["transactions"]?.arrayValue)
        XCTAssertEqual(transactions.compactMap { $0["transaction"]?["transactionId"]?.stringValue }, [bought.transactionId])
        XCTAssertNil(transactions.first?["owner"], "no account here owns it")
        XCTAssertEqual(answer.json["accounts"], .array([]))
    }

    func testAnOrderOnlyTheAppsRefusedEnvironmentKnowsIsNotFound() async throws {
        let gw = try await GatewayE2E.start(self) { $0.allowedEnvironments = ["Production"] }
        let bought = try gw.buy(GatewayE2E.removeAds, owner: "device-quinn", environment: .sandbox)

        let answer = try await gw.send("GET", "\(gw.appURL)/orders/\(bought.orderId)")

        XCTAssertEqual(answer.status, 404, answer.text)
        XCTAssertEqual(answer.errorCode, "ORDER_NOT_FOUND")
        XCTAssertEqual(answer.json["error"]?["retryable"], .bool(false))
        XCTAssertEqual(answer.json["error"]?["requestId"]?.stringValue, answer.headers["x-request-id"])
    }

    func testAnUnknownOrderIs404AndAMalformedOne400() async throws {
        let gw = try await GatewayE2E.start(self)

        let unknown = try await gw.send("GET", "\(gw.appURL)/orders/MNOSUCH0RDER")
        XCTAssertEqual(unknown.status, 404, unknown.text)
        XCTAssertEqual(unknown.errorCode, "ORDER_NOT_FOUND")

        let malformed = try await gw.send("GET", "\(gw.appURL)/orders/MQ6%3Cscript%3E")
        XCTAssertEqual(malformed.status, 400, malformed.text)
        XCTAssertEqual(malformed.errorCode, "MALFORMED_REQUEST")
        XCTAssertFalse(malformed.text.contains("<script>"), malformed.text)

        let badLimit = try await gw.send("GET", "\(gw.appURL)/orders/MSIM100000?limit=0")
        XCTAssertEqual(badLimit.errorCode, "MALFORMED_REQUEST")
        let anonymous = try await gw.send("GET", "\(gw.appURL)/orders/MSIM100000", apiKey: .some(nil))
        XCTAssertEqual(anonymous.status, 401, anonymous.text)
    }
}
