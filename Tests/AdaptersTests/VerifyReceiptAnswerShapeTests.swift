import Foundation
import HTTPServer
import IAPCore
import UpstreamHTTP
import XCTest
@testable import Adapters

/// A verifyReceipt answer the gateway cannot use is upstream's fault (UPSTREAM_INVALID_RESPONSE,
/// answered 502), never the client's malformed input; and the `request_data` echo rule: read at the
/// top level and inside `receipt`, a differing echo refuses, none is fine, another shape is ignored.
final class VerifyReceiptAnswerShapeTests: XCTestCase {
    private typealias F = LegacyFixtures
    private let logs = LegacyLogCapture()

    /// Serves Apple's valid answer changed by `edit` (the document as a JSON object).
    private func serve(_ edit: @escaping @Sendable (inout [String: JSONValue]) -> Void) throws -> LegacyVerifyReceiptServer {
        let server = try LegacyVerifyReceiptServer { _, _, _ in
            var answer = (try? StrictJSON().parse(F.validAnswer()))?.objectValue ?? [:]
            edit(&answer)
            return LegacyVerifyReceiptServer.json(JSONValue.object(answer).jsonText)
        }
        addTeardownBlock { await server.stop() }
        return server
    }

    private func verify(_ server: LegacyVerifyReceiptServer, nonce: String? = "nonce-123") async throws -> AdapterOutcome {
        let client = try UpstreamHTTPClient(configuration: .init(connectTimeout: .seconds(2), requestTimeout: .seconds(10)))
        let adapter = try LegacyReceiptAdapter(upstream: client, endpoints: server.endpoints, mapping: try F.mapping(),
                                               environmentVariables: F.environment, logger: logs.logger,
                                               sleep: { _ in XCTFail("an unusable answer is not retried") })
        return try await adapter.verify(.appReceipt(base64: F.receipt, nonce: nonce), account: "account-1", for: F.app())
    }

    private func refusal(_ server: LegacyVerifyReceiptServer, nonce: String? = "nonce-123") async -> VerificationError? {
        do {
            _ = try await verify(server, nonce: nonce)
            XCTFail("verification succeeded")
            return nil
        } catch {
            return error as? VerificationError
        }
    }

    private static func withReceipt(_ answer: inout [String: JSONValue], _ edit: (inout [String: JSONValue]) -> Void) {
        var receipt = answer["receipt"]?.objectValue ?? [:]
        edit(&receipt)
        answer["receipt"] = .object(receipt)
    }

    // MARK: Unusable answers

    func testAMemberOfTheWrongTypeIsUpstreamInvalidResponseAndNotRetried() async throws {
        let cases: [(String, @Sendable (inout [String: JSONValue]) -> Void)] = [
            ("environment", { $0["environment"] = .int(1) }),
            ("receipt", { $0["receipt"] = .string("a receipt") }),
            ("receipt.bundle_id", { Self.withReceipt(&$0) { $0["bundle_id"] = .int(7) } }),
            ("receipt.in_app", { Self.withReceipt(&$0) { $0["in_app"] = .object([:]) } }),
            ("latest_receipt", { $0["latest_receipt"] = .array([]) }),
        ]
        for (name, edit) in cases {
            let server = try serve(edit)
            let error = await refusal(server)
            XCTAssertEqual(error?.code, .upstreamInvalidResponse, "\(name): \(String(describing: error))")
            XCTAssertEqual(error?.retryable, false, name)
            XCTAssertEqual(server.requests.count, 1, "\(name): an unusable answer is not asked again")
        }
    }

    func testAMissingMemberIsUpstreamInvalidResponse() async throws {
        for member in ["environment", "receipt"] {
            let error = await refusal(try serve { $0.removeValue(forKey: member) })
            XCTAssertEqual(error?.code, .upstreamInvalidResponse, member)
        }
    }

    func testAStatusThatIsNotANumberIsUpstreamInvalidResponseAfterOneCall() async throws {
        let server = try serve { $0["status"] = .string("0") }
        let error = await refusal(server)
        XCTAssertEqual(error?.code, .upstreamInvalidResponse)
        XCTAssertEqual(server.requests.count, 1)
        XCTAssertFalse(error?.message.contains(F.currentSecret) ?? true)
    }

    // MARK: request_data

    func testAnEchoOfAnUnexpectedShapeIsIgnoredWithALogLine() async throws {
        let outcome = try await verify(try serve { $0["request_data"] = .object(["nonce": "nonce-123"]) })
        XCTAssertEqual(outcome.transactions.count, 3)
        XCTAssertTrue(logs.all.contains { $0.contains("verify_receipt_request_data_ignored") && $0.contains("object") },
                      logs.all.joined(separator: "\n"))
    }

    func testAnEchoInsideTheReceiptIsReadAndMustMatch() async throws {
        let matching = try await verify(try serve { Self.withReceipt(&$0) { $0["request_data"] = "nonce-123" } })
        XCTAssertEqual(matching.transactions.count, 3)

        let error = await refusal(try serve { Self.withReceipt(&$0) { $0["request_data"] = "someone-elses-nonce" } })
        XCTAssertEqual(error?.code, .nonceInvalid)
    }

    func testAnyDifferingEchoRefusesEvenBesideAMatchingOne() async throws {
        let error = await refusal(try serve { answer in
            answer["request_data"] = "nonce-123"
            Self.withReceipt(&answer) { $0["request_data"] = "someone-elses-nonce" }
        })
        XCTAssertEqual(error?.code, .nonceInvalid)
    }

    func testNoEchoIsFine() async throws {
        let outcome = try await verify(try serve { _ in })
        XCTAssertEqual(outcome.transactions.count, 3)
    }
}
