import AppStoreSimulator
import Foundation
import IAPCore
@testable import Ledger
import TestSupport
import XCTest

/// `iapgw migrate-storage` (the built binary) from the SQLite ledger of a gateway that served real
/// claims and notifications to a PostgreSQL database, and a gateway on that database answering as
/// the SQLite one did. Needs `IAPGW_TEST_POSTGRES_URL` (Scripts/test.sh sets it).
final class StorageMigrationTests: XCTestCase {
    func testAMigratedPostgreSQLLedgerServesTheSameEntitlementsAndHistory() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapgw-migrate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let postgres = try TestStorage.fresh(in: directory, for: self, requirePostgres: true)

        let e2e = try await NotificationE2E.start(self)
        let gw = e2e.gw
        let accounts = (0..<8).map { "account-\($0)" }
        // Claims side by side (load on the writer), then a renewal, a refund and a refused claim.
        let purchases = try await withThrowingTaskGroup(of: (String, SimulatedPurchase).self) { group in
            for account in accounts {
                group.addTask {
                    let purchase = try e2e.subscribe(owner: "device-\(account)")
                    try await e2e.claim(purchase, account: account)
                    let ads = try gw.buy(GatewayE2E.removeAds, owner: "device-\(account)")
                    try await e2e.claim(ads, account: account)
                    return (account, purchase)
                }
            }
            return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        let renewal = try gw.simulator.renew(originalTransactionId: try XCTUnwrap(purchases["account-1"]).originalTransactionId)
        try await e2e.deliver("DID_RENEW", about: renewal)
        let refund = try gw.simulator.refund(transactionId: try XCTUnwrap(purchases["account-2"]).transactionId)
        try await e2e.deliver("REFUND", about: refund)
        let stolen = try await gw.verifyTransactionId(try XCTUnwrap(purchases["account-3"]).transactionId, account: "account-4")
        XCTAssertEqual(stolen.status, 409, stolen.text)

        let live = try await LedgerBackupTests.iapgw(["migrate-storage", "--from", "sqlite:" + gw.sqlitePath, "--to", postgres.storageURL])
        XCTAssertEqual(live.status, 1, "a ledger a gateway still serves is not migrated")
        XCTAssertTrue(live.stderr.contains("in use"), live.stderr)
        XCTAssertFalse(live.stderr.contains(postgres.storageURL), "no storage URL in an error")

        var before: [String: (entitlements: JSONValue, history: JSONValue)] = [:]
        for account in accounts {
            before[account] = (try await gw.send("GET", "\(gw.appURL)/accounts/\(account)/entitlements").json,
                               try await gw.send("GET", "\(gw.appURL)/accounts/\(account)/history").json)
        }
        XCTAssertEqual(before["account-1"]?.history["attempts"]?.arrayValue?.count, 2)
        XCTAssertEqual(before["account-2"]?.entitlements["entitlements"]?.arrayValue?.compactMap { $0["state"]?.stringValue }.sorted(), ["active", "refunded"], before["account-2"]?.entitlements.jsonText ?? "")
        await gw.harness.stop()
        // This process keeps the stopped gateway's connection open (a real one exits): the move
        // reads a backup of it, the way an operator moves a ledger copied off its host.
        let stopped = directory.appendingPathComponent("stopped.sqlite").path
        let backup = try await LedgerBackupTests.iapgw(["backup", "--from", "sqlite:" + gw.sqlitePath, "--to", stopped])
        XCTAssertEqual(backup.status, 0, backup.stderr)

        let migrated = try await LedgerBackupTests.iapgw(["migrate-storage", "--from", "sqlite:" + stopped,
                                                          "--to", postgres.storageURL])
        XCTAssertEqual(migrated.status, 0, migrated.stderr)
        let report = try StrictJSON().parse(Array(migrated.stdout.utf8))
        XCTAssertEqual(report["verified"], .bool(true))
        let tables = try XCTUnwrap(report["tables"]?.objectValue)
        XCTAssertEqual(tables.count, LedgerSchema.tables.count, "every ledger table: \(tables.keys.sorted())")
        for table in ["ownership", "entitlements", "transactions", "audit_log", "notification_inbox", "webhook_outbox"] {
            let rows = try XCTUnwrap(tables[table]?["rows"]?.intValue, table)
            XCTAssertGreaterThan(rows, 0, table)
            XCTAssertEqual(try postgres.scalar("SELECT count(*) FROM \(table)"), String(rows), table)
        }
        XCTAssertEqual(tables["ownership"]?["rows"]?.intValue, 16)

        let onPostgres = try await GatewayE2E.start(self) { $0.storageURL = postgres.storageURL }
        for account in accounts {
            let entitlements = try await onPostgres.send("GET", "\(onPostgres.appURL)/accounts/\(account)/entitlements")
            XCTAssertEqual(entitlements.json, before[account]?.entitlements, account)
            let history = try await onPostgres.send("GET", "\(onPostgres.appURL)/accounts/\(account)/history")
            XCTAssertEqual(history.json, before[account]?.history, account)
        }
        // New rows continue the numbering: an attempt after the move is audited under a fresh id.
        let unknown = try await onPostgres.verifyTransactionId("9999999999999", account: "newcomer")
        XCTAssertNotEqual(unknown.status, 503, unknown.text)
        let newcomer = try await onPostgres.send("GET", "\(onPostgres.appURL)/accounts/newcomer/history")
        XCTAssertEqual(newcomer.json["attempts"]?.arrayValue?.count, 1, newcomer.text)

        let again = try await LedgerBackupTests.iapgw(["migrate-storage", "--from", "sqlite:" + stopped,
                                                       "--to", postgres.storageURL])
        XCTAssertEqual(again.status, 1)
        XCTAssertTrue(again.stderr.contains("already holds rows"), again.stderr)
    }
}
