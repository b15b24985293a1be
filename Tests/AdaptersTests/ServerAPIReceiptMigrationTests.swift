import Foundation
import XCTest
@testable import Adapters
import AppReceipts
import HTTPServer
import IAPConfig
import IAPCore
import TestPKI

/// The migration path: a legacy receipt verified locally (real Apple-signed receipts, pinned to the
/// real Apple Inc. root, verified at their creation date), then its purchases fetched with Get
/// Transaction History from the scripted server, never with verifyReceipt.
final class ServerAPIReceiptMigrationTests: XCTestCase {
    private var fx: ServerAPIFixture!
    private let realBundleId = "org.getpure.pure-iphone"

    override func setUp() async throws { fx = try ServerAPIFixture() }
    override func tearDown() async throws { await fx.tearDown() }

    private var appleIncRoot: URL { AppleRealVectors.directory.appendingPathComponent(AppleRealVectors.appleIncRoot) }

    private func realApp(environments: Set<AppStoreEnvironment> = [.production]) -> AppPolicy {
        fx.app(environments: environments, bundleId: realBundleId, receiptRoots: [appleIncRoot])
    }

    private func verifyReceipt(_ name: String, app: AppPolicy) async throws(VerificationError) -> AdapterOutcome {
        let base64 = try! AppleRealVectors.text(name).trimmingCharacters(in: .whitespacesAndNewlines)
        return try await (try! fx.adapter()).verify(.appReceipt(base64: base64, nonce: nil), account: "acct-1", for: app)
    }

    func testHistoryLongerThanThePageCapIsRefusedRatherThanJudgedOnItsOldestPages() async throws {
        let base64 = try AppleRealVectors.text(AppleRealVectors.receiptProduction).trimmingCharacters(in: .whitespacesAndNewlines)
        let receipt = try AppReceiptReader(roots: [try Data(contentsOf: appleIncRoot)]).read(base64: base64).receipt
        let records = receipt.inAppPurchases.filter { $0.transactionId != nil }
        let payloads = records.map {
            ServerAPIFixture.transaction($0.transactionId!, original: $0.originalTransactionId, productId: $0.productId ?? "p",
                                         type: "Auto-Renewable Subscription", bundleId: realBundleId,
                                         purchaseDate: $0.purchaseDate)
        }
        let signed = try payloads.map { JSONValue.string(try fx.sign($0)) }
        let firstChain = records[0].originalTransactionId ?? records[0].transactionId!
        // Two pages exist; the adapter may read one.
        fx.server.script("GET", .production, "/inApps/v2/history/\(firstChain)",
                         ScriptedAppStoreServer.ok(["revision": .string("r1"), "hasMore": .bool(true),
                                                    "signedTransactions": .array(Array(signed.prefix(2)))]),
                         ScriptedAppStoreServer.ok(["revision": .string("r2"), "hasMore": .bool(false),
                                                    "signedTransactions": .array(Array(signed.dropFirst(2)))]))
        do {
            _ = try await (try fx.adapter(maxPages: 1)).verify(.appReceipt(base64: base64, nonce: nil), account: "acct-1",
                                                               for: realApp())
            XCTFail("a verdict was drawn from the first page of a longer history")
        } catch let error as VerificationError {
            XCTAssertEqual(error.code, .inputTooLarge)
            XCTAssertTrue(error.message.contains("1 pages"), error.message)
        }
    }

    func testProductionReceiptIsMigratedThroughPagedHistoryWithOneLookupPerCustomer() async throws {
        let base64 = try AppleRealVectors.text(AppleRealVectors.receiptProduction).trimmingCharacters(in: .whitespacesAndNewlines)
        let receipt = try AppReceiptReader(roots: [try Data(contentsOf: appleIncRoot)]).read(base64: base64).receipt
        let records = receipt.inAppPurchases.filter { $0.transactionId != nil }
        XCTAssertEqual(records.count, 4)
        let sub = "Auto-Renewable Subscription"
        let payloads = records.map {
            ServerAPIFixture.transaction($0.transactionId!, original: $0.originalTransactionId, productId: $0.productId ?? "p",
                                         type: sub, bundleId: realBundleId, purchaseDate: $0.purchaseDate)
        }
        // History answers for the whole customer: two pages cover every record of the receipt, so
        // the receipt's other chains need no call of their own.
        let firstChain = records[0].originalTransactionId ?? records[0].transactionId!
        let signed = try payloads.map { JSONValue.string(try fx.sign($0)) }
        fx.server.script("GET", .production, "/inApps/v2/history/\(firstChain)",
                         ScriptedAppStoreServer.ok(["revision": .string("r1"), "hasMore": .bool(true),
                                                    "signedTransactions": .array(Array(signed.prefix(2)))]),
                         ScriptedAppStoreServer.ok(["revision": .string("r2"), "hasMore": .bool(false),
                                                    "signedTransactions": .array(Array(signed.dropFirst(2)) + [signed[0]])]))
        let firstId = records[0].transactionId!
        let firstOriginal = records[0].originalTransactionId ?? firstId
        fx.server.script("GET", .production, "/inApps/v1/subscriptions/\(firstId)", ScriptedAppStoreServer.ok([
            "data": .array([.object(["lastTransactions": .array([.object([
                "status": .int(2), "originalTransactionId": .string(firstOriginal), "signedTransactionInfo": signed[0],
                "signedRenewalInfo": .string(try fx.sign(.object([
                    "originalTransactionId": .string(firstOriginal), "autoRenewStatus": .int(0),
                    "signedDate": .int(ServerAPIFixture.nowMs - 1000), "environment": .string("Production"),
                ]))),
            ])])])]),
        ]))

        let outcome = try await verifyReceipt(AppleRealVectors.receiptProduction, app: realApp())
        XCTAssertEqual(outcome.environment, .production)
        XCTAssertEqual(Set(outcome.transactions.map(\.transactionId)), Set(records.map { $0.transactionId! }))
        XCTAssertEqual(outcome.transactions.count, 4, "deduplicated by transactionId")
        XCTAssertEqual(outcome.renewals.map(\.originalTransactionId), [firstOriginal])
        XCTAssertEqual(fx.server.requests(to: "/inApps/v2/history/\(firstChain)").count, 2)
        XCTAssertEqual(fx.server.requests.filter { $0.path.contains("/history/") }.count, 2)
        XCTAssertFalse(fx.server.requests.contains { $0.path.contains("verifyReceipt") })
    }

    func testAReceiptUnderAnotherRootIsRefusedBeforeAnyLookup() async throws {
        let app = fx.app(bundleId: realBundleId) // receipt roots: the test PKI, not Apple Inc.
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await self.verifyReceipt(AppleRealVectors.receiptProduction, app: app)
        }
        XCTAssertEqual(error?.code, .untrustedRoot)
        XCTAssertEqual(fx.server.requests.count, 0)
    }

    func testAReceiptOfAnotherAppIsRefused() async throws {
        let app = fx.app(bundleId: "com.example.other", receiptRoots: [appleIncRoot])
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await self.verifyReceipt(AppleRealVectors.receiptProduction, app: app)
        }
        XCTAssertEqual(error?.code, .bundleIdMismatch)
        XCTAssertEqual(fx.server.requests.count, 0)
    }

    func testASandboxReceiptIsRefusedByAProductionOnlyApp() async throws {
        let app = fx.app(environments: [.production], bundleId: "dev.bonzer.weeka.app", receiptRoots: [appleIncRoot])
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await self.verifyReceipt(AppleRealVectors.receiptSandboxG5, app: app)
        }
        XCTAssertEqual(error?.code, .environmentNotAllowed)
        XCTAssertEqual(fx.server.requests.count, 0)
    }

    func testAnXcodeReceiptIsNotAnAppStoreReceipt() async throws {
        let app = fx.app(bundleId: realBundleId, receiptRoots: [appleIncRoot])
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await self.verifyReceipt(AppleRealVectors.receiptXcode, app: app)
        }
        XCTAssertEqual(error?.code, .notAppStoreReceipt)
    }

    func testHistoryForgedByAnotherPKIIsRefused() async throws {
        let forger = try TestPKI.CertificateAuthority.make()
        let forgedSigner = forger.signer(leaf: try forger.issueLeaf())
        let base64 = try AppleRealVectors.text(AppleRealVectors.receiptProduction).trimmingCharacters(in: .whitespacesAndNewlines)
        let record = try XCTUnwrap(try AppReceiptReader(roots: [try Data(contentsOf: appleIncRoot)]).read(base64: base64)
            .receipt.inAppPurchases.first)
        let chain = record.originalTransactionId ?? record.transactionId!
        let forged = try forgedSigner.sign(ServerAPIFixture.transaction(record.transactionId!, original: chain, bundleId: realBundleId))
        fx.server.script("GET", .production, "/inApps/v2/history/\(chain)",
                         ScriptedAppStoreServer.ok(["hasMore": .bool(false), "signedTransactions": .array([.string(forged)])]))
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await self.verifyReceipt(AppleRealVectors.receiptProduction, app: self.realApp())
        }
        XCTAssertEqual(error?.code, .untrustedRoot)
    }
}
