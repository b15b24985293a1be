import Foundation
import HTTPServer
@testable import IAPConfig
import IAPCore
import UpstreamHTTP
import XCTest
@testable import Adapters

/// The legacy adapter against a scripted loopback verifyReceipt: real HTTP, real JSON, no timings.
final class LegacyReceiptAdapterTests: LegacyAdapterTestCase {
    // MARK: Valid answers

    func testValidProductionAnswerNormalisesTransactionsRenewalsAndEnvironment() async throws {
        let server = try serve { _, _, _ in .json(200, F.validAnswer()) }
        let outcome = try await adapter(server.endpoints)
            .verify(.appReceipt(base64: F.receipt, nonce: nil), account: "account-1", for: F.app())
        XCTAssertEqual(outcome.adapter, .verifyReceipt)
        XCTAssertEqual(outcome.environment, .production)
        XCTAssertEqual(outcome.mappingVersion, "verifyReceipt/v1")
        XCTAssertEqual(outcome.transactions.map(\.transactionId),
                       ["1000000000000001", "2000000000000001", "2000000000000002"])
        let renewed = try XCTUnwrap(outcome.transactions.last)
        XCTAssertEqual(renewed.expiresDate, 1_701_200_000_000)
        XCTAssertEqual(renewed.appAppleId, F.appAppleId)
        XCTAssertEqual(renewed.bundleId, F.bundleId)
        XCTAssertEqual(outcome.renewals.map(\.originalTransactionId), ["2000000000000001"])
        XCTAssertEqual(outcome.appTransaction?.bundleId, F.bundleId)
        XCTAssertEqual(outcome.followUps.compactMap { ($0 as? KeepLatestReceipt)?.receipt }, ["bGF0ZXN0IHJlY2VpcHQ="],
                       "the newest receipt is kept by the adapter's own follow-up")
        XCTAssertEqual(server.calls("sandbox"), 0)
    }

    func testRequestSentUpstreamCarriesPasswordExcludeOldTransactionsAndRequestData() async throws {
        let server = try serve { _, _, _ in .json(200, F.validAnswer(requestData: "nonce-123")) }
        let outcome = try await adapter(server.endpoints)
            .verify(.appReceipt(base64: F.receipt, nonce: "nonce-123"), account: "account-1", for: F.app())
        XCTAssertEqual(outcome.transactions.count, 3, "a matching echo is accepted")
        let sent = try XCTUnwrap(server.requests.first?.body)
        XCTAssertEqual(sent["receipt-data"], .string(F.receipt))
        XCTAssertEqual(sent["password"], .string(F.currentSecret))
        XCTAssertEqual(sent["exclude-old-transactions"], .bool(true))
        XCTAssertEqual(sent["request_data"], .string("nonce-123"))
        XCTAssertEqual(Set(sent.keys), ["receipt-data", "password", "exclude-old-transactions", "request_data"])
    }

    func testExpiredSubscriptionStatus21006IsAnsweredWithItsData() async throws {
        let server = try serve { _, _, _ in .json(200, F.validAnswer(status: 21006)) }
        let outcome = try await adapter(server.endpoints)
            .verify(.appReceipt(base64: F.receipt, nonce: nil), account: "account-1", for: F.app())
        XCTAssertEqual(outcome.transactions.count, 3)
    }

    // MARK: Environments

    func testSandboxReceiptIsRetriedAgainstSandboxWhenTheAccountMaySandbox() async throws {
        let server = try serve { env, _, _ in
            env == "production" ? LegacyVerifyReceiptServer.status(21007)
                : .json(200, F.validAnswer(environment: "Sandbox", appItemId: 0))
        }
        let app = F.app(sandboxAccounts: ["app-review"])
        let outcome = try await adapter(server.endpoints)
            .verify(.appReceipt(base64: F.receipt, nonce: nil), account: "app-review", for: app)
        XCTAssertEqual(outcome.environment, .sandbox)
        XCTAssertEqual(outcome.transactions.first?.environment, .sandbox)
        XCTAssertEqual(server.requests.map(\.environment), ["production", "sandbox"])
    }

    func testSandboxReceiptIsRefusedWithoutCallingSandboxWhenTheAccountMayNot() async throws {
        let server = try serve { env, _, _ in
            env == "production" ? LegacyVerifyReceiptServer.status(21007)
                : .json(200, F.validAnswer(environment: "Sandbox", appItemId: 0))
        }
        let error = await refusal(try adapter(server.endpoints), account: "someone",
                                  app: F.app(sandboxAccounts: ["app-review"]))
        XCTAssertEqual(error?.code, .environmentNotAllowed)
        XCTAssertEqual(server.calls("sandbox"), 0)
    }

    func testSandboxOnlyAppStartsAtSandboxAndRefusesAProductionReceipt() async throws {
        let server = try serve { env, _, _ in
            env == "sandbox" ? LegacyVerifyReceiptServer.status(21008) : .json(200, F.validAnswer())
        }
        let error = await refusal(try adapter(server.endpoints), app: F.app(environments: [.sandbox]))
        XCTAssertEqual(error?.code, .environmentNotAllowed)
        XCTAssertEqual(server.requests.map(\.environment), ["sandbox"])
    }

    /// One identity rule for both paths (`AppIdentity.check`): a Sandbox receipt states app id 0, so a
    /// nonzero one that is not the app's names another app, here as on the migration path (which
    /// refused it while verifyReceipt answers were accepted).
    func testSandboxAnswerNamingAnotherAppIdIsRefusedLikeOnTheMigrationPath() async throws {
        let server = try serve { env, _, _ in
            env == "production" ? LegacyVerifyReceiptServer.status(21007)
                : .json(200, F.validAnswer(environment: "Sandbox", appItemId: 999))
        }
        let error = await refusal(try adapter(server.endpoints), account: "app-review",
                                  app: F.app(sandboxAccounts: ["app-review"]))
        XCTAssertEqual(error?.code, .appAppleIdMismatch)
        XCTAssertEqual(server.requests.map(\.environment), ["production", "sandbox"])
    }

    func testSandboxAnswerFromAnAppThatAllowsOnlyProductionIsRefused() async throws {
        let server = try serve { _, _, _ in .json(200, F.validAnswer(environment: "Sandbox", appItemId: 0)) }
        let error = await refusal(try adapter(server.endpoints))
        XCTAssertEqual(error?.code, .environmentNotAllowed)
    }

    // MARK: Shared secret

    func testRejectedSecretFallsBackToThePreviousOneCountsTheUseAndLogsNoSecret() async throws {
        let server = try serve { _, body, _ in
            body["password"] == .string(F.previousSecret) ? .json(200, F.validAnswer())
                : LegacyVerifyReceiptServer.status(21004)
        }
        let adapter = try adapter(server.endpoints)
        let app = F.app(withPrevious: true)
        _ = try await adapter.verify(.appReceipt(base64: F.receipt, nonce: nil), account: "account-1", for: app)
        _ = try await adapter.verify(.appReceipt(base64: F.receipt, nonce: nil), account: "account-1", for: app)
        XCTAssertEqual(adapter.previousSecretUses(bundleId: F.bundleId), 2)
        XCTAssertEqual(adapter.previousSecretUses, [F.bundleId: 2])
        XCTAssertEqual(server.requests.map { $0.body["password"] },
                       [.string(F.currentSecret), .string(F.previousSecret), .string(F.currentSecret), .string(F.previousSecret)])
        let warnings = logs.all.filter { $0.contains("shared_secret_previous_used") }
        XCTAssertEqual(warnings.count, 2)
        XCTAssertTrue(warnings.allSatisfy { $0.contains(F.bundleId) })
        XCTAssertFalse(logs.all.isEmpty)
        for line in logs.all {
            XCTAssertFalse(line.contains(F.currentSecret) || line.contains(F.previousSecret), line)
            XCTAssertFalse(line.contains(F.receipt), line)
        }
    }

    func testRejectedSecretWithoutPreviousIsCredentialsRejectedNamingTheReferenceOnly() async throws {
        let server = try serve { _, _, _ in LegacyVerifyReceiptServer.status(21004) }
        let error = await refusal(try adapter(server.endpoints))
        XCTAssertEqual(error?.code, .upstreamCredentialsRejected)
        XCTAssertTrue(error?.message.contains("env:DEMO_SHARED_SECRET") ?? false, "\(String(describing: error))")
        XCTAssertFalse(error?.message.contains(F.currentSecret) ?? true)
        XCTAssertEqual(server.requests.count, 1)
    }

    func testPreviousSecretAlsoRejectedIsCredentialsRejected() async throws {
        let server = try serve { _, _, _ in LegacyVerifyReceiptServer.status(21004) }
        let adapter = try adapter(server.endpoints)
        let error = await refusal(adapter, app: F.app(withPrevious: true))
        XCTAssertEqual(error?.code, .upstreamCredentialsRejected)
        XCTAssertEqual(server.requests.count, 2)
        XCTAssertEqual(adapter.previousSecretUses(bundleId: F.bundleId), 0)
    }

    func testUnsetSharedSecretIsInvalidConfigurationBeforeAnyCall() async throws {
        let server = try serve { _, _, _ in .json(200, F.validAnswer()) }
        let error = await refusal(try adapter(server.endpoints, environment: [:]))
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertTrue(error?.message.contains("env:DEMO_SHARED_SECRET") ?? false)
        XCTAssertEqual(server.requests.count, 0)
    }

    // MARK: Final refusals

    func testRefusalStatusesMapToStableCodes() async throws {
        let table: [(Int, VerificationError.Code)] = [
            (21000, .invalidConfiguration), (21002, .malformedReceipt), (21003, .receiptNotAuthentic),
            (21010, .transactionNotFound), (21001, .upstreamUnavailable), (21999, .upstreamUnavailable),
        ]
        for (status, code) in table {
            let server = try serve { _, _, _ in LegacyVerifyReceiptServer.status(status) }
            let error = await refusal(try adapter(server.endpoints))
            XCTAssertEqual(error?.code, code, "status \(status)")
            XCTAssertEqual(server.requests.count, 1, "status \(status) is final: no retry")
        }
    }

    func testWrongBundleIdIsBundleIdMismatch() async throws {
        let server = try serve { _, _, _ in .json(200, F.validAnswer(bundleId: "com.example.other")) }
        let error = await refusal(try adapter(server.endpoints))
        XCTAssertEqual(error?.code, .bundleIdMismatch)
    }

    func testWrongAppItemIdInProductionIsAppAppleIdMismatch() async throws {
        let server = try serve { _, _, _ in .json(200, F.validAnswer(appItemId: 999)) }
        let error = await refusal(try adapter(server.endpoints))
        XCTAssertEqual(error?.code, .appAppleIdMismatch)
    }

    func testEchoedRequestDataThatDiffersIsNonceInvalid() async throws {
        let server = try serve { _, _, _ in .json(200, F.validAnswer(requestData: "someone-elses-nonce")) }
        let error = await refusal(try adapter(server.endpoints), nonce: "nonce-123")
        XCTAssertEqual(error?.code, .nonceInvalid)
    }

    func testReceiptThatIsNotBase64IsRefusedWithoutACall() async throws {
        let server = try serve { _, _, _ in .json(200, F.validAnswer()) }
        do {
            _ = try await adapter(server.endpoints)
                .verify(.appReceipt(base64: "not base64!", nonce: nil), account: "account-1", for: F.app())
            XCTFail("verification succeeded")
        } catch {
            XCTAssertEqual((error as? VerificationError)?.code, .malformedBase64)
        }
        XCTAssertEqual(server.requests.count, 0)
    }

    func testOnlyAppReceiptsCanBeVerified() throws {
        let adapter = try adapter(EnvironmentURLs(production: "http://127.0.0.1:1/", sandbox: "http://127.0.0.1:1/"))
        XCTAssertTrue(adapter.canVerify(.appReceipt(base64: F.receipt, nonce: nil)))
        XCTAssertFalse(adapter.canVerify(.transactionId("1")))
        XCTAssertFalse(adapter.canVerify(.signedTransaction("a.b.c")))
        XCTAssertEqual(adapter.id, .verifyReceipt)
    }
}
