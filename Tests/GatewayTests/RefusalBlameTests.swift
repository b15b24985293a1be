import AppStoreSimulator
import Foundation
@testable import Gateway
import IAPCore
import TestPKI
import TestSupport
import XCTest

/// Refusals that blame the right party: 400 only for a request body the
/// route cannot read, 422 for evidence refused for its content, 5xx for the gateway's side with a
/// plain message (details in the log line carrying the request id), invariant failures 500.
final class RefusalBlameTests: XCTestCase {
    // MARK: 422 for the content of evidence

    /// A genuine signed transaction of the demo app, its payload changed by `edit` and signed again
    /// by the simulator's (trusted) key: what Apple's key would have signed.
    private func reSigned(_ gw: GatewayE2E, _ genuine: String, edit: (inout [String: JSONValue]) -> Void) throws -> String {
        guard case .object(var payload) = try jwsPayload(genuine) else { throw VerificationError(.malformedJWS, "payload") }
        edit(&payload)
        return try gw.simulator.pki.jwsSigner.sign(.object(payload))
    }

    func testContentFaultsInsideASignedTransactionAre422() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")
        let signer = gw.simulator.pki.jwsSigner
        let genuineText = try jwsPayload(purchase.signedTransaction).jsonText
        // Duplicate key, wrong type, missing field: each inside the signed payload, none in the body.
        let duplicate = try TestPKI.signJWS(payloadText: "{\"transactionId\":\"1\"," + genuineText.dropFirst(),
                                            chain: signer.x5c, key: signer.key)
        let wrongType = try reSigned(gw, purchase.signedTransaction) { $0["price"] = .string("2990") }
        let missing = try reSigned(gw, purchase.signedTransaction) { $0.removeValue(forKey: "signedDate") }
        for (jws, code) in [(duplicate, "DUPLICATE_JSON_KEY"), (wrongType, "INVALID_FIELD_TYPE"), (missing, "MISSING_FIELD")] {
            let answer = try await gw.verifySigned(jws, account: "bob")
            XCTAssertEqual(answer.status, 422, answer.text)
            XCTAssertEqual(answer.errorCode, code, answer.text)
        }
    }

    func testAGenuinelySignedTransactionCarryingAnExpiredExpIsRefusedNotGranted() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")
        let expired = try reSigned(gw, purchase.signedTransaction) { $0["exp"] = .int(978_307_200) }  // 2001

        let answer = try await gw.verifySigned(expired, account: "bob")

        XCTAssertEqual(answer.status, 422, answer.text)
        XCTAssertEqual(answer.errorCode, "JWT_EXPIRED")
        let entitlements = try await gw.entitlements("bob")
        XCTAssertEqual(entitlements, [])
    }

    // MARK: 5xx: plain messages, details in the log

    func testUnreachableAppleIsA503WithAPlainMessageAndTheDetailsInTheLogLine() async throws {
        let logs = LogCapture()
        let gw = try await GatewayE2E.start(self, logger: logs.logger)
        let purchase = try gw.buy(GatewayE2E.removeAds, owner: "device-bob")
        let port = gw.simulator.port
        await gw.simulator.stop()

        let answer = try await gw.verifyTransactionId(purchase.transactionId, account: "bob")

        XCTAssertEqual(answer.status, 503, answer.text)
        XCTAssertEqual(answer.errorCode, "UPSTREAM_UNAVAILABLE")
        for leak in ["127.0.0.1", ":\(port)", "port \(port)", "http", "onnect", "Failed", "(", "App Store Server API getTransactionInfo"] {
            XCTAssertFalse(answer.text.contains(leak), "\(leak) in \(answer.text)")
        }
        let requestId = try XCTUnwrap(answer.json["error"]?["requestId"]?.stringValue)
        XCTAssertEqual(answer.headers["x-request-id"], requestId)
        let line = try XCTUnwrap(logs.captured.first { $0.contains("request_refused") && $0.contains(requestId) })
        XCTAssertTrue(line.contains("\"detail\"") && line.contains("\(port)"), line)
    }

    /// Decided: the nonce is consumed before Apple is asked (one attempt per nonce, so a replay race
    /// or an induced upstream failure can never buy a second attempt); an attempt Apple could not
    /// answer spends it too, and the client retries with a new one.
    func testAReceiptAttemptAppleCouldNotAnswerSpendsItsNonce() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")
        let nonce = try await gw.nonce(for: "alice")
        gw.simulator.faults.setVerifyReceiptFailure(.http503)
        gw.simulator.faults.failNext(10)
        let body: [String: JSONValue] = ["account": "alice", "receipt": .string(purchase.receiptBase64), "nonce": .string(nonce)]

        let first = try await gw.post("verify", body)
        XCTAssertEqual(first.status, 503, first.text)
        gw.simulator.faults.reset()
        let again = try await gw.post("verify", body)
        XCTAssertEqual(again.errorCode, "NONCE_REUSED", again.text)
        let fresh = try await gw.verifyReceipt(purchase.receiptBase64, account: "alice")
        XCTAssertEqual(fresh.status, 200, fresh.text)
    }

    func testRejectedSharedSecretNamesNoFileToTheClientButTheLogDoes() async throws {
        let logs = LogCapture()
        let gw = try await GatewayE2E.start(self, logger: logs.logger)
        let purchase = try gw.buy(owner: "device-alice")
        try gw.rewriteSecretFile("shared-secret", "wrong-secret-\(UUID().uuidString)")

        let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: "alice")

        XCTAssertEqual(answer.status, 502, answer.text)
        XCTAssertEqual(answer.errorCode, "UPSTREAM_CREDENTIALS_REJECTED")
        for leak in ["file:", "shared-secret", gw.harness.directory.path, "21004", gw.bundleId] {
            XCTAssertFalse(answer.text.contains(leak), "\(leak) in \(answer.text)")
        }
        let requestId = try XCTUnwrap(answer.json["error"]?["requestId"]?.stringValue)
        let line = try XCTUnwrap(logs.captured.first { $0.contains("request_refused") && $0.contains(requestId) })
        XCTAssertTrue(line.contains("shared-secret"), line)
    }

    func testA4xxMessageIsStillAboutTheClientsOwnEvidence() async throws {
        let gw = try await GatewayE2E.start(self)
        let answer = try await gw.post("verify", ["account": "bob", "transactionId": "not-a-number"])
        XCTAssertEqual(answer.status, 400, answer.text)
        XCTAssertTrue(answer.json["error"]?["message"]?.stringValue?.contains("transaction id") ?? false, answer.text)
    }

    // MARK: Statuses per code

    func testEveryCodeHasTheStatusOfThePartyAtFault() {
        let expected: [(VerificationError.Code, Int)] = [
            (.malformedRequest, 400), (.malformedJSON, 422), (.duplicateJSONKey, 422), (.invalidFieldType, 422),
            (.missingField, 422), (.jwtExpired, 422), (.jwtNotYetValid, 422), (.jwtAudienceNotAccepted, 422),
            (.internalError, 500), (.invalidConfiguration, 500), (.upstreamInvalidResponse, 502),
            (.upstreamCredentialsRejected, 502), (.storageUnavailable, 503), (.upstreamUnavailable, 503),
        ]
        for (code, status) in expected {
            XCTAssertEqual(ErrorResponses.status(for: code), status, code.rawValue)
        }
        XCTAssertFalse(VerificationError.Code.internalError.retryable)
        XCTAssertFalse(VerificationError.Code.upstreamInvalidResponse.retryable)
    }

    func testAn500InternalErrorCarriesNoneOfItsDetails() {
        let error = VerificationError(.internalError, "storage: entitlement for a purchase not bound")
        let response = ErrorResponses.response(error, requestId: "req-1")
        XCTAssertEqual(response.status, 500)
        let json = (try? StrictJSON().parse(response.body)) ?? .null
        XCTAssertEqual(json["error"]?["code"], "INTERNAL_ERROR")
        XCTAssertEqual(json["error"]?["retryable"], .bool(false))
        XCTAssertEqual(json["error"]?["requestId"], "req-1")
        XCTAssertFalse(String(decoding: response.body, as: UTF8.self).contains("storage:"))
        XCTAssertFalse(response.headers.contains { $0.0 == "Retry-After" })
    }

    // MARK: /metrics

    /// A grant whose sealed receipt cannot be stored is still a grant: it is counted as a lost
    /// write, never as a refusal.
    func testAGrantWhoseLaterWriteFailsIsNotCountedAsARefusal() async throws {
        let gw = try await GatewayE2E.start(self)
        let purchase = try gw.buy(owner: "device-alice")
        try sqlite(gw.sqlitePath, "CREATE TRIGGER refuse_latest_receipts BEFORE INSERT ON latest_receipts "
                   + "BEGIN SELECT RAISE(FAIL, 'test: no latest receipts'); END;")

        let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: "alice")
        XCTAssertEqual(answer.status, 200, answer.text)

        let metrics = try await gw.get("/metrics").text
        XCTAssertFalse(metrics.contains("iapgw_verification_refusals_total{"), metrics)
        XCTAssertTrue(metrics.contains(#"iapgw_ledger_writes_lost_total{what="latest_receipt"} 1"#), metrics)
    }

    /// A refusal whose audit row cannot be written is one refusal (its own code) and one lost write.
    func testARefusalWhoseAuditRowIsLostIsCountedOnceUnderItsOwnCode() async throws {
        let gw = try await GatewayE2E.start(self)
        try sqlite(gw.sqlitePath, "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log "
                   + "BEGIN SELECT RAISE(FAIL, 'test: no audit'); END;")

        let answer = try await gw.verifyTransactionId("9999999999999999", account: "bob")
        XCTAssertEqual(answer.status, 422, answer.text)
        let code = try XCTUnwrap(answer.errorCode)

        let metrics = try await gw.get("/metrics").text
        let refusals = metrics.split(separator: "\n").filter { $0.hasPrefix("iapgw_verification_refusals_total{") }
        XCTAssertEqual(refusals, ["iapgw_verification_refusals_total{code=\"\(code)\"} 1"], metrics)
        XCTAssertTrue(metrics.contains(#"iapgw_ledger_writes_lost_total{what="audit"} 1"#), metrics)
    }

    private func sqlite(_ path: String, _ sql: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [path, sql]
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
    }
}
