import Foundation
import IAPCore
import XCTest
@testable import Ledger

/// A fresh directory per test, removed afterwards.
class LedgerTestCase: XCTestCase {
    var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("ledger-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    var databasePath: String { directory.appendingPathComponent("ledger.sqlite").path }

    func openLedger() throws -> SQLLedger { try SQLLedger(storage: "sqlite:" + databasePath) }

    func transaction(_ id: String, original: String? = nil, product: String = "com.example.pro",
                     signedDate: Int64? = nil, revocationDate: Int64? = nil) -> CanonicalTransaction {
        var transaction = CanonicalTransaction(transactionId: id, productId: product, source: "serverAPI",
                                               mappingVersion: "serverAPI/v1")
        transaction.originalTransactionId = original
        transaction.bundleId = "com.example.app"
        transaction.signedDate = signedDate
        transaction.revocationDate = revocationDate
        return transaction
    }

    func entitlement(_ account: String, original: String, state: Entitlement.State = .active) -> Entitlement {
        Entitlement(account: account, productId: "com.example.pro", state: state, expiresDate: 2_000_000_000_000,
                    originalTransactionId: original, source: "serverAPI")
    }

    func claim(_ account: String, _ transactions: [CanonicalTransaction], entitlements: [Entitlement] = [],
               bundleId: String = "com.example.app", now: Int64 = 1_700_000_000_000) -> PurchaseClaim {
        PurchaseClaim(bundleId: bundleId, account: account, transactions: transactions, entitlements: entitlements,
                      now: now)
    }

    /// The error `body` throws, failing the test if it does not throw.
    func errorThrown(file: StaticString = #filePath, line: UInt = #line,
                     _ body: () throws(VerificationError) -> Void) -> VerificationError? {
        do {
            try body()
            XCTFail("expected a VerificationError", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    func errorCode(file: StaticString = #filePath, line: UInt = #line,
                   _ body: () throws(VerificationError) -> Void) -> VerificationError.Code? {
        errorThrown(file: file, line: line, body)?.code
    }
}
