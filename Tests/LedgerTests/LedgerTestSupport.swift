import Foundation
import IAPCore
import Synchronization
import XCTest
@testable import Ledger

/// A fresh ledger per test: an SQLite file in a fresh directory by default, or, when
/// `IAPGW_TEST_POSTGRES_URL` names a PostgreSQL server, a fresh schema on it (dropped afterwards),
/// so the same suite proves both backends.
class LedgerTestCase: XCTestCase {
    var directory: URL!
    /// The test's own PostgreSQL schema, when the suite runs against PostgreSQL.
    private(set) var postgresSchema: String?

    static let postgresServerURL: String? = {
        let url = ProcessInfo.processInfo.environment["IAPGW_TEST_POSTGRES_URL"] ?? ""
        return url.isEmpty ? nil : url
    }()

    var usesPostgres: Bool { Self.postgresServerURL != nil }

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("ledger-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        if Self.postgresServerURL != nil {
            let schema = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            try adminExecute("CREATE SCHEMA \(schema)")
            postgresSchema = schema
        }
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
        if let schema = postgresSchema {
            try adminExecute("DROP SCHEMA \(schema) CASCADE")
        }
    }

    var databasePath: String { directory.appendingPathComponent("ledger.sqlite").path }

    /// The storage URL of this test's ledger: the SQLite file, or the server with the test's schema first
    /// on the search path (every connection of the pool gets it from the URL).
    var storage: String {
        guard let server = Self.postgresServerURL, let schema = postgresSchema else { return "sqlite:" + databasePath }
        return server + (server.contains("?") ? "&" : "?") + "options=-csearch_path%3D" + schema
    }

    func openLedger() throws -> SQLLedger { try SQLLedger(storage: storage) }

    /// The released migrations of the backend under test.
    var releasedMigrations: [String] { LedgerSchema.migrations(usesPostgres ? .postgres : .sqlite) }

    /// A ledger over another list of migrations (to prove versioning), on the backend under test.
    func openLedger(migrations: [String]) throws -> SQLLedger {
        if usesPostgres { return SQLLedger(database: try PostgresDatabase(url: storage, migrations: migrations)) }
        return try SQLLedger(storage: databasePath, migrations: migrations)
    }

    func skipOnPostgres(_ reason: String) throws {
        try XCTSkipIf(usesPostgres, "SQLite only: \(reason)")
    }

    /// Runs `sql` on the server outside any test schema (creating and dropping schemas, terminating sessions).
    func adminExecute(_ sql: String) throws {
        guard let server = Self.postgresServerURL else { return }
        let connection = try PostgresConnection.open(url: server)
        try connection.executeScript(sql, operation: "test setup")
    }

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

    /// A claim's judge that answers with `audit` and `body`, recording the outcome it was handed.
    final class RecordingJudge: ClaimJudge {
        let audit: AuditRecord
        let body: @Sendable (ClaimOutcome) -> String
        let seen = Mutex<[ClaimOutcome]>([])
        /// Thrown instead of answering, when set.
        let refusal: VerificationError?

        init(audit: AuditRecord, refusal: VerificationError? = nil, body: @escaping @Sendable (ClaimOutcome) -> String = { _ in "{}" }) {
            self.audit = audit
            self.refusal = refusal
            self.body = body
        }

        func judge(_ outcome: ClaimOutcome) throws(VerificationError) -> ClaimAnswer {
            seen.withLock { $0.append(outcome) }
            if let refusal { throw refusal }
            return ClaimAnswer(audit: audit, body: body(outcome))
        }
    }

    func auditRecord(_ evidence: String, time: Int64 = 1_700_000_000_000, verdict: AuditVerdict = .granted,
                     errorCode: VerificationError.Code? = nil) -> AuditRecord {
        AuditRecord(time: time, bundleId: "com.example.app", account: "alice", evidenceKind: "signedTransaction",
                    evidenceSHA256: String(repeating: evidence, count: 64 / evidence.count), transactionIds: ["1000", "1001"],
                    productIds: ["com.example.pro"], environment: "Production", verdict: verdict, errorCode: errorCode,
                    adapter: "serverAPI", latencyMicros: 1234)
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
