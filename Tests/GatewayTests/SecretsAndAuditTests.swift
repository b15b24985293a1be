import AppStoreSimulator
import AppleTrust
import Foundation
import IAPConfig
import IAPCore
import Ledger
import TestSupport
import XCTest

/// What the gateway must never disclose (logs, responses, storage) and what it must always record.
final class SecretsAndAuditTests: XCTestCase {
    /// Runs granted and refused flows of every kind with a debug-level capturing logger, then looks
    /// for each secret in every log line and response body.
    func testNoSecretOrReceiptAppearsInAnyLogLineOrResponse() async throws {
        let capture = LogCapture()
        let gw = try await GatewayE2E.start(self, logger: capture.logger)
        let alice = try gw.buy(owner: "device-alice")
        let bob = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")
        let pem = try String(contentsOf: gw.harness.directory.appendingPathComponent("secrets/AuthKey.p8"), encoding: .utf8)
        let pemBodyLines = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.map(String.init)
        XCTAssertFalse(pemBodyLines.isEmpty)

        var answers: [GatewayAnswer] = []
        answers.append(try await gw.verifyReceipt(alice.receiptBase64, account: "alice"))          // granted
        answers.append(try await gw.post("verify", ["account": "alice", "receipt": .string(alice.receiptBase64)]))  // no nonce
        answers.append(try await gw.verifyReceipt(alice.receiptBase64, account: "mallory"))        // bound elsewhere
        answers.append(try await gw.verifyTransactionId(bob.transactionId, account: "bob"))        // Server API JWT
        answers.append(try await gw.verifySigned(bob.signedTransaction, account: "bob"))
        answers.append(try await gw.post("verify", ["account": "alice", "receipt": .string("AAAA" + alice.receiptBase64),
                                                    "nonce": .string(try await gw.nonce(for: "alice"))]))  // corrupted
        answers.append(try await gw.post("nonces", ["account": "alice"], apiKey: .some("wrong-key")))
        try gw.rotateSimulatorSharedSecret(to: "rotated-secret-value")
        answers.append(try await gw.verifyReceipt(alice.receiptBase64, account: "alice"))          // 21004
        answers.append(try await gw.get("/metrics"))

        XCTAssertEqual(answers.map(\.status), [200, 422, 409, 200, 200, 422, 401, 502, 200])
        let lines = capture.captured
        XCTAssertFalse(lines.isEmpty, "the logger captured the flows")
        let secrets: [(String, String)] = [
            ("API key", gw.harness.apiKey), ("shared secret", gw.harness.sharedSecret),
            ("rotated shared secret", "rotated-secret-value"),
            ("receipt (prefix)", String(alice.receiptBase64.prefix(48))),
            ("receipt (tail)", String(alice.receiptBase64.suffix(48))),
            ("signed transaction's signature", String(bob.signedTransaction.split(separator: ".").last ?? "")),
        ] + pemBodyLines.map { ("p8 PEM body line", $0) }
        for (name, secret) in secrets {
            for line in lines {
                XCTAssertFalse(line.contains(secret), "\(name) in log line: \(line.prefix(300))")
            }
            for answer in answers {
                XCTAssertFalse(answer.text.contains(secret), "\(name) in a response: \(answer.text.prefix(300))")
            }
        }
    }

    func testRejectedGatewayCredentialsAreLoggedAsAnErrorWhileClientRefusalsStayInfo() async throws {
        let capture = LogCapture()
        let gw = try await GatewayE2E.start(self, logger: capture.logger)
        let alice = try gw.buy(owner: "device-alice")
        let refused = try await gw.post("verify", ["account": "alice", "receipt": .string(alice.receiptBase64)])
        XCTAssertEqual(refused.errorCode, "NONCE_REQUIRED")
        try gw.rotateSimulatorSharedSecret(to: "rotated-secret-value")

        let misconfigured = try await gw.verifyReceipt(alice.receiptBase64, account: "alice")

        XCTAssertEqual(misconfigured.status, 502, misconfigured.text)
        let refusals = capture.captured.compactMap { try? StrictJSON().parse(Array($0.utf8)) }
            .filter { $0["event"]?.stringValue == "request_refused" }
        let levels = Dictionary(refusals.map { ($0["code"]?.stringValue ?? "", $0["level"]?.stringValue ?? "") },
                                uniquingKeysWith: { a, _ in a })
        // A broken deployment (every old-app purchase now fails) must reach an operator's alerting.
        XCTAssertEqual(levels["UPSTREAM_CREDENTIALS_REJECTED"], "error")
        XCTAssertEqual(levels["NONCE_REQUIRED"], "info")
    }

    func testReceiptsAreNeverStoredReadableInTheLedgerFile() async throws {
        let gw = try await GatewayE2E.start(self)
        let alice = try gw.buy(owner: "device-alice")
        let answer = try await gw.verifyReceipt(alice.receiptBase64, account: "alice")
        XCTAssertEqual(answer.status, 200, answer.text)

        let probe = Array(alice.receiptBase64.utf8.prefix(48))
        for suffix in ["", "-wal"] {
            guard let bytes = FileManager.default.contents(atPath: gw.sqlitePath + suffix) else { continue }
            XCTAssertNil(Array(bytes).firstRange(of: probe), "readable receipt in iapgw.sqlite\(suffix)")
        }
    }

    func testAuditRecordsHoldVerdictsCodesAndOnlyTheReceiptsDigest() async throws {
        let gw = try await GatewayE2E.start(self)
        let alice = try gw.buy(owner: "device-alice")
        let granted = try await gw.verifyReceipt(alice.receiptBase64, account: "alice")
        XCTAssertEqual(granted.status, 200, granted.text)
        let refused = try await gw.verifyReceipt(alice.receiptBase64, account: "mallory")
        XCTAssertEqual(refused.status, 409, refused.text)

        let ledger = try SQLLedger(storage: "sqlite:" + gw.sqlitePath)
        let records = try ledger.auditRecords(bundleId: gw.bundleId, limit: 10)

        XCTAssertEqual(records.count, 2)
        let digest = SHA256Digest.lowercaseHex(alice.receiptBase64)
        let byAccount = Dictionary(uniqueKeysWithValues: records.map { ($0.account ?? "", $0) })
        let aliceRecord = try XCTUnwrap(byAccount["alice"])
        let malloryRecord = try XCTUnwrap(byAccount["mallory"])
        XCTAssertEqual(aliceRecord.verdict, .granted)
        XCTAssertNil(aliceRecord.errorCode)
        XCTAssertEqual(aliceRecord.transactionIds, [alice.transactionId])
        XCTAssertEqual(aliceRecord.adapter, "verifyReceipt")
        XCTAssertEqual(malloryRecord.verdict, .refused)
        XCTAssertEqual(malloryRecord.errorCode, .transactionBoundToOtherAccount)
        for record in records {
            XCTAssertEqual(record.evidenceKind, "receipt", "the routing vocabulary of AppPolicy.EvidenceKind")
            XCTAssertEqual(record.evidenceSHA256, digest)
            XCTAssertFalse("\(record)".contains(String(alice.receiptBase64.prefix(48))))
        }
    }

    func testLinesWrittenByAnAdapterDuringARequestCarryTheRequestId() async throws {
        let capture = LogCapture()
        let gw = try await GatewayE2E.start(self, logger: capture.logger)
        let purchase = try gw.buy(owner: "device-rid")
        let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: "rid")
        XCTAssertEqual(answer.status, 200, answer.text)
        let requestId = try XCTUnwrap(answer.headers["x-request-id"])
        let adapterLines = capture.captured.compactMap { try? StrictJSON().parse(Array($0.utf8)) }
            .filter { $0["event"]?.stringValue == "verify_receipt_answered" }
        XCTAssertFalse(adapterLines.isEmpty, "the legacy adapter logs Apple's answer")
        for line in adapterLines {
            XCTAssertEqual(line["requestId"]?.stringValue, requestId, "\(line)")
        }
    }
}
