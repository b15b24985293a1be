import AppStoreSimulator
import AppleTrust
import Foundation
@testable import Gateway
import IAPConfig
import IAPCore
import Ledger
import TestSupport
import XCTest

/// One verify attempt leaves one audit row, completed once: by the claim's judge with the verdict
/// its answer states, or by the endpoint with the refusal. Over real HTTP to the simulator, for
/// every kind of evidence.
final class VerifyAuditTrailTests: XCTestCase {
    private struct Attempt {
        let name: String
        let account: String
        let evidence: String
        let send: () async throws -> GatewayAnswer
    }

    private func rows(_ gw: GatewayE2E, _ account: String) throws -> [AuditRecord] {
        try gw.harness.parts.storedLedger.auditRecords(bundleId: gw.bundleId, limit: 1_000).filter { $0.account == account }
    }

    /// The one row of `attempt`, checked against what its answer said.
    private func assertOneRow(_ gw: GatewayE2E, _ attempt: Attempt, _ answer: GatewayAnswer,
                              file: StaticString = #filePath, line: UInt = #line) throws {
        let rows = try rows(gw, attempt.account)
        XCTAssertEqual(rows.count, 1, "\(attempt.name): \(rows)", file: file, line: line)
        guard let row = rows.first else { return }
        XCTAssertEqual(row.evidenceSHA256, SHA256Digest.lowercaseHex(attempt.evidence), attempt.name, file: file, line: line)
        if answer.status == 200 {
            XCTAssertEqual(row.verdict.rawValue, answer.json["verdict"]?.stringValue, attempt.name, file: file, line: line)
            XCTAssertNil(row.errorCode, attempt.name, file: file, line: line)
            XCTAssertEqual(row.adapter, answer.json["adapter"]?.stringValue, attempt.name, file: file, line: line)
            XCTAssertEqual(row.environment, answer.json["environment"]?.stringValue, attempt.name, file: file, line: line)
            XCTAssertEqual(row.transactionIds, (answer.json["transactions"]?.arrayValue ?? []).compactMap { $0["transactionId"]?.stringValue },
                           attempt.name, file: file, line: line)
        } else {
            XCTAssertEqual(row.verdict, .refused, attempt.name, file: file, line: line)
            XCTAssertEqual(row.errorCode?.rawValue, answer.errorCode, attempt.name, file: file, line: line)
        }
    }

    private func subscription(_ gw: GatewayE2E, owner: String, expired: Bool) throws -> SimulatedPurchase {
        try gw.simulator.purchase(PurchaseRequest(
            bundleId: gw.bundleId, productId: GatewayE2E.monthly, type: .autoRenewable, owner: owner,
            subscriptionGroupIdentifier: "demo.pro", price: 4_990,
            purchaseDate: expired ? Date().addingTimeInterval(-40 * 86_400) : nil))
    }

    func testEachKindOfPurchaseEvidenceLeavesOneRowWithTheVerdictItsAnswerStates() async throws {
        let gw = try await GatewayE2E.start(self)
        var attempts: [(Attempt, expected: String)] = []
        for expired in [false, true] {
            let word = expired ? "expired" : "active"
            let receiptOwner = "device-receipt-\(word)"
            _ = try subscription(gw, owner: receiptOwner, expired: expired)
            let receipt = try gw.simulator.receipt(owner: receiptOwner, bundleId: gw.bundleId)
            let byId = try subscription(gw, owner: "device-id-\(word)", expired: expired)
            let signed = try subscription(gw, owner: "device-jws-\(word)", expired: expired)
            let verdict = expired ? "notGranted" : "granted"
            attempts += [
                (Attempt(name: "receipt, \(word)", account: "receipt-\(word)", evidence: receipt) {
                    try await gw.verifyReceipt(receipt, account: "receipt-\(word)")
                }, verdict),
                (Attempt(name: "transactionId, \(word)", account: "id-\(word)", evidence: byId.transactionId) {
                    try await gw.verifyTransactionId(byId.transactionId, account: "id-\(word)")
                }, verdict),
                (Attempt(name: "signedTransaction, \(word)", account: "jws-\(word)", evidence: signed.signedTransaction) {
                    try await gw.verifySigned(signed.signedTransaction, account: "jws-\(word)")
                }, verdict),
            ]
        }
        // A product the app does not sell: refused, and the refusal is the attempt's one row.
        let unsold = try gw.simulator.purchase(PurchaseRequest(bundleId: gw.bundleId, productId: "com.example.demo.unsold",
                                                               type: .nonConsumable, owner: "device-unsold", price: 990))
        attempts.append((Attempt(name: "transactionId, unsold", account: "unsold", evidence: unsold.transactionId) {
            try await gw.verifyTransactionId(unsold.transactionId, account: "unsold")
        }, "UNKNOWN_PRODUCT"))

        for (attempt, expected) in attempts {
            let answer = try await attempt.send()
            XCTAssertEqual(answer.json["verdict"]?.stringValue ?? answer.errorCode, expected, "\(attempt.name): \(answer.text)")
            try assertOneRow(gw, attempt, answer)
        }
    }

    func testEachKindOfAppTransactionEvidenceLeavesOneRowWithTheVerdictItsAnswerStates() async throws {
        let wentFree = Int64(1_700_000_000_000)
        let gw = try await GatewayE2E.start(self) {
            $0.grandfathering = AppPolicy.Grandfathering(productIds: [GatewayE2E.removeAds],
                                                         beforeOriginalApplicationVersion: "2.0")
        }
        gw.simulator.setAppPurchase(owner: "device-paid", bundleId: gw.bundleId, originalApplicationVersion: "1.4",
                                    originalPurchaseDate: wentFree - 86_400_000)
        let laterId = gw.simulator.setAppPurchase(owner: "device-free", bundleId: gw.bundleId, originalApplicationVersion: "2.1",
                                                  originalPurchaseDate: wentFree + 86_400_000)
        let paid = try gw.simulator.signedAppTransaction(owner: "device-paid", bundleId: gw.bundleId)
        let free = try gw.simulator.signedAppTransaction(owner: "device-free", bundleId: gw.bundleId)
        let attempts: [(Attempt, expected: String)] = [
            (Attempt(name: "signedAppTransaction, paid", account: "paid", evidence: paid) {
                try await gw.post("verify", ["account": .string("paid"), "signedAppTransaction": .string(paid)])
            }, "granted"),
            (Attempt(name: "signedAppTransaction, free", account: "free", evidence: free) {
                try await gw.post("verify", ["account": .string("free"), "signedAppTransaction": .string(free)])
            }, "notGranted"),
            (Attempt(name: "appTransactionId, free", account: "free-by-id", evidence: laterId) {
                try await gw.post("verify", ["account": .string("free-by-id"), "appTransactionId": .string(laterId)])
            }, "notGranted"),
            // The paid download is bound to its first account: another's claim is refused.
            (Attempt(name: "signedAppTransaction, another account", account: "mallory", evidence: paid) {
                try await gw.post("verify", ["account": .string("mallory"), "signedAppTransaction": .string(paid)])
            }, "TRANSACTION_BOUND_TO_OTHER_ACCOUNT"),
        ]
        for (attempt, expected) in attempts {
            let answer = try await attempt.send()
            XCTAssertEqual(answer.json["verdict"]?.stringValue ?? answer.errorCode, expected, "\(attempt.name): \(answer.text)")
            try assertOneRow(gw, attempt, answer)
        }
    }

    /// A receipt whose live purchase has expired and whose other purchase was refunded: answered
    /// notGranted, the refund listed as `revoked` and never granted nor queued for Finish
    /// Transaction, and the one row holds both purchases with the answer's verdict.
    func testARefundedPurchaseBesideAnExpiredOneIsAnsweredNotGrantedInOneRow() async throws {
        let gw = try await GatewayE2E.start(self) { $0.finishTransactions = true }
        let expired = try subscription(gw, owner: "device-ria", expired: true)
        let refunded = try gw.buy(GatewayE2E.removeAds, owner: "device-ria")
        _ = try gw.simulator.refund(transactionId: refunded.transactionId)
        let receipt = try gw.simulator.receipt(owner: "device-ria", bundleId: gw.bundleId)
        let attempt = Attempt(name: "receipt", account: "ria", evidence: receipt) {
            try await gw.verifyReceipt(receipt, account: "ria")
        }

        let answer = try await attempt.send()

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.json["verdict"]?.stringValue, "notGranted", answer.text)
        XCTAssertEqual(answer.json["revoked"], .array([.string(refunded.transactionId)]))
        let granted = (answer.json["newlyGranted"]?.arrayValue ?? []).compactMap(\.stringValue)
        XCTAssertFalse(granted.contains(refunded.transactionId), answer.text)
        XCTAssertTrue(granted.contains(expired.transactionId), answer.text)
        try assertOneRow(gw, attempt, answer)
        XCTAssertEqual(Set(try rows(gw, "ria").first?.transactionIds ?? []), [expired.transactionId, refunded.transactionId])
        let queued = try gw.harness.parts.storedLedger.finishEntries(bundleId: gw.bundleId).map(\.transactionId)
        XCTAssertFalse(queued.contains(refunded.transactionId), "\(queued)")
    }

    /// A device-signed transaction replayed after Apple's refund notification: the ledger reports
    /// the newer fact, the judge refuses inside the claim, nothing of the replay is stored, and the
    /// replay's one row is the refusal beside the first attempt's grant.
    func testAReplayAfterARefundNotificationIsRefusedInsideTheClaimWithOneRow() async throws {
        let gw = try await GatewayE2E.start(self) {
            $0.localOnlyJWS = true
            $0.finishTransactions = true
        }
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-sol")
        let first = try await gw.verifySigned(purchase.signedTransaction, account: "sol")
        XCTAssertEqual(first.status, 200, first.text)
        let refund = try gw.simulator.refund(transactionId: purchase.transactionId)
        _ = try await gw.simulator.sendNotification(type: "REFUND", subtype: nil, purchase: refund, to: gw.harness.notificationURL)
        try await gw.waitUntilInboxIsDrained()

        let replay = try await gw.verifySigned(purchase.signedTransaction, account: "sol")

        XCTAssertEqual(replay.status, 422, replay.text)
        XCTAssertEqual(replay.errorCode, "TRANSACTION_REVOKED")
        let rows = try rows(gw, "sol")
        XCTAssertEqual(rows.map(\.verdict), [.refused, .granted])
        XCTAssertEqual(rows.map(\.errorCode), [.transactionRevoked, nil])
        XCTAssertEqual(rows.map(\.evidenceSHA256), Array(repeating: SHA256Digest.lowercaseHex(purchase.signedTransaction), count: 2))
        let entitlements = try await gw.entitlements("sol")
        XCTAssertEqual(entitlements.first?["state"], "refunded")
    }
}
