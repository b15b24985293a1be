import Foundation
import IAPCore
import TestSupport
import XCTest

/// The OpenAPI document's answer schemas are the answers: real answers of the demo deployment
/// (purchases the simulator signs with its test PKI, over real HTTP) validate against the schemas
/// the gateway's own `/openapi.json` states, closed objects and required members included.
final class ResponseSchemaTests: XCTestCase {
    private func validator(_ gw: GatewayE2E) async throws -> SchemaValidator {
        let document = try await gw.get("/openapi.json")
        XCTAssertEqual(document.status, 200)
        return SchemaValidator(document: document.json)
    }

    private func assertValid(_ answer: GatewayAnswer, _ component: String, _ schemas: SchemaValidator,
                             file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(schemas.problems(answer.json, component: component), [], "\(component): \(answer.text)", file: file, line: line)
    }

    func testVerifyAnswersOfEveryEvidenceKindAreWhatTheDocumentDeclares() async throws {
        let gw = try await GatewayE2E.start(self)
        let schemas = try await validator(gw)
        let subscription = try gw.buy(owner: "schema-alice")
        let lifetime = try gw.buy(GatewayE2E.removeAds, owner: "schema-alice")

        let answers = [
            try await gw.verifySigned(subscription.signedTransaction, account: "schema-alice"),
            try await gw.verifyTransactionId(lifetime.transactionId, account: "schema-alice"),
            try await gw.verifyReceipt(lifetime.receiptBase64, account: "schema-alice"),
        ]
        for answer in answers {
            XCTAssertEqual(answer.status, 200, answer.text)
            XCTAssertFalse(answer.json["transactions"]?.arrayValue?.isEmpty ?? true, answer.text)
            XCTAssertFalse(answer.json["entitlements"]?.arrayValue?.isEmpty ?? true, answer.text)
            assertValid(answer, "VerifyResponse", schemas)
        }
    }

    func testACompareModeAnswerWithItsComparisonIsWhatTheDocumentDeclares() async throws {
        let gw = try await GatewayE2E.start(self) { $0.receiptRouting = "compare" }
        let schemas = try await validator(gw)
        let bought = try gw.buy(owner: "schema-bob")

        let answer = try await gw.verifyReceipt(bought.receiptBase64, account: "schema-bob")

        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertNotNil(answer.json["comparison"], answer.text)
        assertValid(answer, "VerifyResponse", schemas)
        let stored = try await gw.send("GET", "\(gw.appURL)/comparisons")
        XCTAssertEqual(stored.json["comparisons"]?.arrayValue?.count, 1, stored.text)
        assertValid(stored, "Comparisons", schemas)
    }

    func testTheSupportAndProbeAnswersAreWhatTheDocumentDeclares() async throws {
        let gw = try await GatewayE2E.start(self)
        let schemas = try await validator(gw)
        let bought = try gw.buy(owner: "schema-carol")
        let verified = try await gw.verifySigned(bought.signedTransaction, account: "schema-carol")
        XCTAssertEqual(verified.status, 200, verified.text)

        assertValid(try await gw.send("GET", "\(gw.appURL)/accounts/schema-carol/entitlements"), "Entitlements", schemas)
        assertValid(try await gw.send("GET", "\(gw.appURL)/accounts/schema-carol/history"), "History", schemas)
        assertValid(try await gw.send("GET", "\(gw.appURL)/orders/\(bought.orderId)"), "OrderLookup", schemas)
        assertValid(try await gw.post("nonces", ["account": "schema-carol"]), "Nonce", schemas)
        assertValid(try await gw.get("/healthz"), "Status", schemas)
        assertValid(try await gw.get("/readyz"), "Status", schemas)
        let refused = try await gw.post("verify", ["account": "schema-carol", "signedTransaction": "a.b.c"], apiKey: .some(nil))
        XCTAssertEqual(refused.status, 401)
        assertValid(refused, "Error", schemas)
    }

    // The check itself can fail: a member the encoder does not write, or one it always writes
    // left out, is caught.
    func testAnAnswerOutsideItsSchemaIsCaught() async throws {
        let gw = try await GatewayE2E.start(self)
        let schemas = try await validator(gw)
        let answer = try await gw.post("nonces", ["account": "schema-dave"])
        guard case .object(var members) = answer.json else { return XCTFail(answer.text) }

        members["extra"] = .string("x")
        XCTAssertEqual(schemas.problems(.object(members), component: "Nonce"), ["$: member extra is not declared"])
        members["extra"] = nil
        members["expiresAt"] = nil
        XCTAssertEqual(schemas.problems(.object(members), component: "Nonce"), ["$: lacks required expiresAt"])
        members["expiresAt"] = .string("soon")
        XCTAssertEqual(schemas.problems(.object(members), component: "Nonce"), ["$.expiresAt: string, not integer"])
    }
}
