import AppStoreSimulator
import Foundation
import IAPCore
import TestSupport
import XCTest

/// One verdict vocabulary. Each kind of evidence (receipt, transaction id,
/// signed transaction) against each outcome (access now, genuine but no access now, every
/// presented purchase refunded) gets the same answer: `granted`, `notGranted`, or
/// 422 `TRANSACTION_REVOKED`.
final class VerdictTests: XCTestCase {
    enum Evidence: String, CaseIterable { case receipt, transactionId, signedTransaction }
    enum Outcome: String, CaseIterable { case active, expired, refunded }

    private func purchase(_ outcome: Outcome, owner: String, in gw: GatewayE2E) throws -> SimulatedPurchase {
        // An expired subscription: bought 40 days ago, a 30-day period, nothing after it.
        let boughtAt: Date? = outcome == .expired ? Date().addingTimeInterval(-40 * 86_400) : nil
        let bought = try gw.simulator.purchase(PurchaseRequest(
            bundleId: gw.bundleId, productId: GatewayE2E.monthly, type: .autoRenewable, owner: owner,
            subscriptionGroupIdentifier: "demo.pro", price: 4_990, purchaseDate: boughtAt))
        if outcome == .refunded { _ = try gw.simulator.refund(transactionId: bought.transactionId) }
        return bought
    }

    private func verify(_ evidence: Evidence, _ p: SimulatedPurchase, owner: String, account: String,
                        in gw: GatewayE2E) async throws -> GatewayAnswer {
        switch evidence {
        case .receipt: try await gw.verifyReceipt(try gw.simulator.receipt(owner: owner, bundleId: gw.bundleId), account: account)
        case .transactionId: try await gw.verifyTransactionId(p.transactionId, account: account)
        case .signedTransaction: try await gw.verifySigned(p.signedTransaction, account: account)
        }
    }

    func testEveryKindOfEvidenceGetsTheSameVerdictForTheSameFacts() async throws {
        let gw = try await GatewayE2E.start(self)
        for evidence in Evidence.allCases {
            for outcome in Outcome.allCases {
                let name = "\(evidence.rawValue) of an \(outcome.rawValue) subscription"
                let owner = "device-\(evidence.rawValue)-\(outcome.rawValue)"
                let p = try purchase(outcome, owner: owner, in: gw)
                let answer = try await verify(evidence, p, owner: owner, account: "acct-\(evidence.rawValue)-\(outcome.rawValue)",
                                              in: gw)
                switch outcome {
                case .active:
                    XCTAssertEqual(answer.status, 200, "\(name): \(answer.text)")
                    XCTAssertEqual(answer.json["verdict"]?.stringValue, "granted", name)
                    XCTAssertEqual(answer.json["entitlements"]?.arrayValue?.first?["grantsAccess"], .bool(true), name)
                case .expired:
                    XCTAssertEqual(answer.status, 200, "\(name): \(answer.text)")
                    XCTAssertEqual(answer.json["verdict"]?.stringValue, "notGranted", name)
                    XCTAssertEqual(answer.json["entitlements"]?.arrayValue?.first?["state"]?.stringValue, "expired", name)
                    XCTAssertEqual(answer.json["entitlements"]?.arrayValue?.first?["grantsAccess"], .bool(false), name)
                case .refunded:
                    XCTAssertEqual(answer.status, 422, "\(name): \(answer.text)")
                    XCTAssertEqual(answer.errorCode, "TRANSACTION_REVOKED", name)
                    XCTAssertNil(answer.json["verdict"], name)
                }
            }
        }
    }

    /// The audit row (what support reads in the account's history) says what the 200 said: an
    /// expired subscription answered `notGranted` is not recorded as granted access.
    func testTheAuditRowOfEachAnswerSaysTheVerdictTheAnswerGave() async throws {
        let gw = try await GatewayE2E.start(self)
        for evidence in Evidence.allCases {
            for outcome in [Outcome.active, .expired] {
                let name = "\(evidence.rawValue) of an \(outcome.rawValue) subscription"
                let owner = "device-\(evidence.rawValue)-\(outcome.rawValue)"
                let account = "acct-\(evidence.rawValue)-\(outcome.rawValue)"
                let answer = try await verify(evidence, try purchase(outcome, owner: owner, in: gw), owner: owner,
                                              account: account, in: gw)
                XCTAssertEqual(answer.status, 200, "\(name): \(answer.text)")
                let verdict = try XCTUnwrap(answer.json["verdict"]?.stringValue, name)
                XCTAssertEqual(verdict, outcome == .active ? "granted" : "notGranted", name)
                let history = try await gw.send("GET", "\(gw.appURL)/accounts/\(account)/history")
                XCTAssertEqual(history.status, 200, history.text)
                let attempts = history.json["attempts"]?.arrayValue ?? []
                XCTAssertEqual(attempts.map { $0["verdict"]?.stringValue }, [verdict], "\(name): \(history.text)")
            }
        }
    }

    func testTheVerdictValuesAreTheOnesTheOpenAPIDocumentDeclares() async throws {
        let gw = try await GatewayE2E.start(self)
        let document = try await gw.get("/openapi.json")
        let verdict = document.json["components"]?["schemas"]?["VerifyResponse"]?["properties"]?["verdict"]
        XCTAssertEqual(verdict?["enum"], .array(["granted", "notGranted"]))
    }
}
