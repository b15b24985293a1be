import AppStoreSimulator
import AppleTrust
import Foundation
@testable import IAPConfig
import IAPCore
import Ledger
import TestSupport
import UpstreamHTTP
import XCTest

/// The support desk (issue 15 item 3): `GET /v1/apps/{bundleId}/accounts/{account}/history` over
/// real HTTP against the simulator, the ledger's history by transaction id, and audit retention.
final class SupportHistoryTests: XCTestCase {
    /// An app backend's verify with its own request id and client version.
    private func verify(_ e2e: NotificationE2E, _ body: [String: JSONValue], requestId: String,
                        clientVersion: String?) async throws -> GatewayAnswer {
        var headers = [("Authorization", "Bearer \(e2e.gw.harness.apiKey)"), ("Content-Type", "application/json"),
                       ("X-Request-Id", requestId)]
        if let clientVersion { headers.append(("X-Client-Version", clientVersion)) }
        let response = try await e2e.gw.client.send(UpstreamRequest(
            method: "POST", url: "\(e2e.gw.appURL)/verify", headers: headers, body: Array(JSONValue.object(body).jsonText.utf8)))
        return GatewayAnswer(status: response.status, headers: response.headers, body: response.body)
    }

    func testHistoryShowsEachAttemptAndTheChainsGrantsRenewalRefundAndNotifications() async throws {
        let e2e = try await NotificationE2E.start(self)
        let gw = e2e.gw
        let first = try e2e.subscribe(owner: "device-alice")
        let longVersion = "ios-app/2.3 \"build\" \\41 " + String(repeating: "x", count: 100)

        let granted = try await verify(e2e, ["account": "alice", "transactionId": .string(first.transactionId)],
                                       requestId: "support-granted", clientVersion: longVersion)
        XCTAssertEqual(granted.status, 200, granted.text)
        let stolen = try await verify(e2e, ["account": "mallory", "transactionId": .string(first.transactionId)],
                                      requestId: "support-stolen", clientVersion: nil)
        XCTAssertEqual(stolen.status, 409, stolen.text)
        let unknown = try await verify(e2e, ["account": "alice", "transactionId": "9999999999999"],
                                       requestId: "support-unknown", clientVersion: "ios-app/2.3")
        XCTAssertEqual(unknown.status / 100, 4, unknown.text)
        let nonce = try await gw.nonce(for: "alice")
        let receipt = try await verify(e2e, ["account": "alice", "receipt": .string(first.receiptBase64), "nonce": .string(nonce)],
                                       requestId: "support-receipt", clientVersion: "ios-app/1.9")
        XCTAssertEqual(receipt.status, 200, receipt.text)

        let renewal = try gw.simulator.renew(originalTransactionId: first.originalTransactionId)
        try await e2e.deliver("DID_RENEW", about: renewal)
        let renewed = try await verify(e2e, ["account": "alice", "signedTransaction": .string(renewal.signedTransaction)],
                                       requestId: "support-renewed", clientVersion: "ios-app/2.3")
        XCTAssertEqual(renewed.status, 200, renewed.text)
        let refund = try gw.simulator.refund(transactionId: renewal.transactionId)
        try await e2e.deliver("REFUND", about: refund)

        let answer = try await gw.send("GET", "\(gw.appURL)/accounts/alice/history")
        XCTAssertEqual(answer.status, 200, answer.text)
        let attempts = try XCTUnwrap(answer.json["attempts"]?.arrayValue)
        XCTAssertEqual(attempts.compactMap { $0["requestId"]?.stringValue },
                       ["support-renewed", "support-receipt", "support-unknown", "support-granted"], "alice's, newest first")
        let byId = Dictionary(uniqueKeysWithValues: attempts.map { ($0["requestId"]?.stringValue ?? "", $0) })

        let grant = try XCTUnwrap(byId["support-granted"])
        XCTAssertEqual(grant["verdict"], "granted")
        XCTAssertEqual(grant["evidenceKind"], "transactionId")
        XCTAssertEqual(grant["environment"], "Production")
        XCTAssertNil(grant["code"])
        let digest = SHA256Digest.lowercaseHex(first.transactionId)
        XCTAssertEqual(grant["evidenceSHA256Prefix"]?.stringValue, String(digest.prefix(16)))
        XCTAssertFalse(answer.text.contains(digest), "a prefix of the digest only")
        // Bounded to 64 characters; quotes and backslashes are not kept.
        XCTAssertEqual(grant["clientVersion"]?.stringValue,
                       String(("ios-app/2.3 ?build? ?41 " + String(repeating: "x", count: 100)).prefix(64)))

        let refused = try XCTUnwrap(byId["support-unknown"])
        XCTAssertEqual(refused["verdict"], "refused")
        XCTAssertEqual(refused["clientVersion"], "ios-app/2.3")
        XCTAssertNotNil(refused["code"]?.stringValue)
        XCTAssertEqual(refused["code"]?.stringValue, unknown.errorCode)
        XCTAssertTrue(refused["appleStatus"]?.stringValue?.hasPrefix("HTTP 404 errorCode 40400") == true,
                      "the Server API's error: \(refused)")
        XCTAssertEqual(byId["support-receipt"]?["appleStatus"], "0", "verifyReceipt's status")
        XCTAssertEqual(byId["support-receipt"]?["evidenceKind"], "receipt")
        XCTAssertFalse(answer.text.contains(String(first.receiptBase64.prefix(48))), "never the evidence")
        XCTAssertNil(byId["support-renewed"]?["appleStatus"], "a signed transaction is verified without Apple")

        let chains = try XCTUnwrap(answer.json["chains"]?.arrayValue)
        XCTAssertEqual(chains.count, 1)
        let chain = chains[0]
        XCTAssertEqual(chain["originalTransactionId"]?.stringValue, first.originalTransactionId)
        XCTAssertEqual(chain["owner"], "alice")
        XCTAssertEqual(chain["grants"]?.arrayValue?.compactMap { $0["transactionId"]?.stringValue },
                       [first.transactionId, renewal.transactionId])
        XCTAssertEqual(chain["notifications"]?.arrayValue?.compactMap { $0["notificationType"]?.stringValue },
                       ["DID_RENEW", "REFUND"])
        XCTAssertEqual(chain["notifications"]?.arrayValue?.compactMap { $0["status"]?.stringValue }, ["processed", "processed"])
        XCTAssertEqual(chain["subscription"]?["state"], "refunded")
        XCTAssertEqual(chain["entitlement"]?["state"], "refunded")

        // mallory's attempt is hers: refused as bound elsewhere, and no chain of hers.
        let mallory = try await gw.send("GET", "\(gw.appURL)/accounts/mallory/history?since=0&limit=10")
        XCTAssertEqual(mallory.status, 200, mallory.text)
        XCTAssertEqual(mallory.json["attempts"]?.arrayValue?.compactMap { $0["code"]?.stringValue },
                       ["TRANSACTION_BOUND_TO_OTHER_ACCOUNT"])
        XCTAssertEqual(mallory.json["chains"]?.arrayValue?.count, 0)

        // By transaction id (`iapgw audit --transaction-id`): every attempt naming the purchase, any account.
        let byTransaction = try e2e.ledger.supportHistory(bundleId: gw.bundleId, subject: .transaction(renewal.transactionId),
                                                          since: 0, limit: 100)
        XCTAssertEqual(byTransaction.chains.map(\.owner), ["alice"])
        XCTAssertEqual(Set(byTransaction.attempts.compactMap(\.requestId)),
                       ["support-renewed", "support-receipt", "support-stolen", "support-granted"])

        // `iapgw audit` reads the same ledger and answers the same way.
        let audit = try ProcessRun.run(GatewayProcess.binary.path, [
            "audit", "--app", gw.bundleId, "--transaction-id", renewal.transactionId,
            "--config", gw.harness.directory.path, "--mappings", GatewayProcess.mappings.path])
        XCTAssertEqual(audit.status, 0, audit.stderr)
        let printed = try StrictJSON().parse(Array(audit.stdout.utf8))
        XCTAssertEqual(printed["transactionId"]?.stringValue, renewal.transactionId)
        XCTAssertEqual(printed["attempts"]?.arrayValue?.compactMap { $0["requestId"]?.stringValue },
                       ["support-renewed", "support-receipt", "support-stolen", "support-granted"])
        XCTAssertEqual(printed["chains"]?.arrayValue?.first?["owner"], "alice")
        XCTAssertEqual(try ProcessRun.run(GatewayProcess.binary.path, ["audit", "--app", gw.bundleId]).status, 2,
                       "one of --account and --transaction-id")

        // since and limit narrow it; the key is the app's.
        guard case .int(let since)? = byId["support-receipt"]?["time"] else { return XCTFail("no time: \(attempts)") }
        let recent = try await gw.send("GET", "\(gw.appURL)/accounts/alice/history?since=\(since)&limit=1")
        XCTAssertEqual(recent.json["attempts"]?.arrayValue?.compactMap { $0["requestId"]?.stringValue }, ["support-renewed"])
        XCTAssertEqual(recent.json["truncated"], .bool(true))
        let anonymous = try await gw.send("GET", "\(gw.appURL)/accounts/alice/history", apiKey: .some(nil))
        XCTAssertEqual(anonymous.status, 401, anonymous.text)
        let unknownParameter = try await gw.send("GET", "\(gw.appURL)/accounts/alice/history?from=0")
        XCTAssertEqual(unknownParameter.errorCode, "MALFORMED_REQUEST")
    }

    func testAuditRowsOlderThanTheRetentionArePurgedAndTheRetentionIsConfigurable() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("audit-retention-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let ledger = try SQLLedger(storage: "sqlite:" + directory.appendingPathComponent("ledger.sqlite").path)
        let day: Int64 = 86_400_000
        let now: Int64 = 1_800_000_000_000
        for (age, id) in [(401, "old"), (399, "recent")] {
            try ledger.recordAudit(AuditRecord(
                time: now - Int64(age) * day, bundleId: "com.example.app", account: "alice", evidenceKind: "transactionId",
                evidenceSHA256: SHA256Digest.lowercaseHex(id), transactionIds: [], productIds: [], environment: nil,
                verdict: .refused, errorCode: .transactionNotFound, adapter: nil, latencyMicros: 1, requestId: id))
        }
        let settings = GatewayConfig.Background()
        XCTAssertEqual(settings.auditRetentionDays, 400)
        XCTAssertEqual(try ledger.purgeAudit(olderThan: now - settings.auditRetentionDays * day), 1)
        let left = try ledger.supportHistory(bundleId: "com.example.app", subject: .account("alice"), since: 0, limit: 10)
        XCTAssertEqual(left.attempts.compactMap(\.requestId), ["recent"])

        XCTAssertEqual(try settings.overridden(by: ["IAPGW_AUDIT_RETENTION_DAYS": "30"]).auditRetentionDays, 30)
        XCTAssertThrowsError(try settings.overridden(by: ["IAPGW_AUDIT_RETENTION_DAYS": "0"]))
    }
}
