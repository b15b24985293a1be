import AppStoreSimulator
import AppleTrust
import Foundation
import IAPCore
import TestSupport
import XCTest

/// The owner rule at the gateway (real HTTP against the simulator), on SQLite and, where
/// `IAPGW_TEST_POSTGRES_URL` is set, on PostgreSQL: a purchase chain belongs to the first account
/// that claims it, and no evidence of that chain (the same transaction, a renewal, the receipt, a
/// JWS whose header is not Apple's) grants it, or is answered as granted, to anyone else.
final class OwnershipRuleTests: XCTestCase {
    /// The demo gateway on this run's engine.
    private func start() async throws -> GatewayE2E {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("owner-\(UUID().uuidString)")
        let storage = try TestStorage.fresh(in: directory, for: self)
        let gw = try await GatewayE2E.start(self) { options in
            options.nonceRequired = false
            if case .postgres(let url, _, _) = storage.backend { options.storageURL = url }
        }
        if case .postgres = storage.backend {
            XCTAssertFalse(FileManager.default.fileExists(atPath: gw.sqlitePath), "the ledger is PostgreSQL's, not a SQLite file")
        }
        return gw
    }

    /// A refusal that grants nothing and names the other owner's binding; never `alreadyGranted`.
    private func assertBoundElsewhere(_ answer: GatewayAnswer, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(answer.status, 409, answer.text, file: file, line: line)
        XCTAssertEqual(answer.errorCode, "TRANSACTION_BOUND_TO_OTHER_ACCOUNT", file: file, line: line)
        XCTAssertNil(answer.json["alreadyGranted"], answer.text, file: file, line: line)
        XCTAssertNil(answer.json["newlyGranted"], answer.text, file: file, line: line)
    }

    /// Who owns the purchase's chain, as support sees it (the order look-up).
    private func owner(_ gw: GatewayE2E, of purchase: SimulatedPurchase) async throws -> String? {
        let answer = try await gw.send("GET", "\(gw.appURL)/orders/\(purchase.orderId)")
        XCTAssertEqual(answer.status, 200, answer.text)
        return answer.json["transactions"]?.arrayValue?.first?["owner"]?.stringValue
    }

    func testASecondAccountsClaimOfABoundPurchaseIsRefusedWhateverTheEvidence() async throws {
        let gw = try await start()
        let bought = try gw.buy(GatewayE2E.removeAds, owner: "device-ann")
        let first = try await gw.verifyTransactionId(bought.transactionId, account: "ann")
        XCTAssertEqual(first.status, 200, first.text)

        assertBoundElsewhere(try await gw.verifyTransactionId(bought.transactionId, account: "ben"))
        assertBoundElsewhere(try await gw.verifySigned(bought.signedTransaction, account: "ben"))
        assertBoundElsewhere(try await gw.post("verify", ["account": "ben", "receipt": .string(bought.receiptBase64)]))

        let bens = try await gw.entitlements("ben")
        XCTAssertEqual(bens, [], "nothing of ann's reaches ben")
        let again = try await gw.verifyTransactionId(bought.transactionId, account: "ann")
        XCTAssertEqual(again.json["alreadyGranted"], .array([.string(bought.transactionId)]), again.text)
        let owner = try await owner(gw, of: bought)
        XCTAssertEqual(owner, "ann")
    }

    func testARenewalOfABoundChainIsRefusedToAnotherAccount() async throws {
        let gw = try await start()
        let subscribed = try gw.buy(owner: "device-cat")
        let first = try await gw.verifyTransactionId(subscribed.transactionId, account: "cat")
        XCTAssertEqual(first.status, 200, first.text)
        let renewal = try gw.simulator.renew(originalTransactionId: subscribed.originalTransactionId)

        // The renewal is a transaction the ledger has not seen: only the chain's owner may take it.
        assertBoundElsewhere(try await gw.verifyTransactionId(renewal.transactionId, account: "dan"))
        assertBoundElsewhere(try await gw.verifySigned(renewal.signedTransaction, account: "dan"))
        let dans = try await gw.entitlements("dan")
        XCTAssertEqual(dans, [], "dan holds no entitlement on cat's chain")

        let cats = try await gw.verifySigned(renewal.signedTransaction, account: "cat")
        XCTAssertEqual(cats.status, 200, cats.text)
        XCTAssertEqual(cats.json["newlyGranted"], .array([.string(renewal.transactionId)]), "the renewal was never granted to dan")
        let owner = try await owner(gw, of: subscribed)
        XCTAssertEqual(owner, "cat")
    }

    func testConcurrentClaimsOfOnePurchaseByTwoAccountsLeaveOneOwner() async throws {
        let gw = try await start()
        let bought = try gw.buy(GatewayE2E.removeAds, owner: "device-eve")

        let answers = try await withThrowingTaskGroup(of: (String, GatewayAnswer).self) { group in
            for i in 0..<8 {
                let account = i % 2 == 0 ? "eve" : "fay"
                group.addTask { (account, try await gw.verifyTransactionId(bought.transactionId, account: account)) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }

        let owner = try await owner(gw, of: bought)
        let winner = try XCTUnwrap(owner)
        for (account, answer) in answers {
            if account == winner {
                XCTAssertEqual(answer.status, 200, answer.text)
            } else {
                assertBoundElsewhere(answer)
            }
        }
        let granted = answers.filter { $0.1.status == 200 }.compactMap { $0.1.json["newlyGranted"]?.arrayValue }.flatMap { $0 }
        XCTAssertEqual(granted, [.string(bought.transactionId)], "granted once, to the owner")
    }

    /// The header of `jws` with `alg` replaced (nil: removed), the payload and signature kept.
    private func withAlgorithm(_ alg: String?, _ jws: String) throws -> String {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard case .object(var header) = try StrictJSON().parse(try Base64URL.decode(parts[0])) else {
            throw XCTSkip("the simulator's JWS header is not an object")
        }
        header["alg"] = alg.map(JSONValue.string)
        return ([Base64URL.encode(Array(JSONValue.object(header).jsonText.utf8))] + parts.dropFirst()).joined(separator: ".")
    }

    func testASignedTransactionWhoseAlgIsNotES256IsRefusedAndBindsNothing() async throws {
        let gw = try await start()
        let bought = try gw.buy(GatewayE2E.removeAds, owner: "device-gus")

        for alg in ["none", "HS256", "ES384", "RS256", "es256", nil] {
            let answer = try await gw.verifySigned(try withAlgorithm(alg, bought.signedTransaction), account: "mallory")
            XCTAssertEqual(answer.status, 422, "\(alg ?? "no alg"): \(answer.text)")
            XCTAssertEqual(answer.errorCode, "UNSUPPORTED_ALGORITHM", alg ?? "no alg")
        }
        let owner = try await owner(gw, of: bought)
        XCTAssertNil(owner, "a refused JWS binds nothing")
        let genuine = try await gw.verifySigned(bought.signedTransaction, account: "gus")
        XCTAssertEqual(genuine.status, 200, genuine.text)
    }
}
