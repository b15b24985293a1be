import CommandLineSupport
import Foundation
import IAPConfig
import IAPCore
import Ledger

/// `iapgw migrate-storage`: the move from one gateway on SQLite to several on PostgreSQL.
struct MigrateStorageCommand: Subcommand {
    let name = "migrate-storage"
    let summary = "copy every row of a stopped SQLite ledger into an empty PostgreSQL one, verified"
    let usage = """
        usage: iapgw migrate-storage --from sqlite:PATH --to postgres://… [--timeout SECONDS]
          refuses a ledger in use (stop the gateway first) and a PostgreSQL database holding ledger rows;
          copies every table in one PostgreSQL transaction, reads both back and prints each table's row
          count and SHA-256 with "verified": true (exit 0), or names the table that differs (exit 1).
          A password is best given to libpq apart from the URL (PGPASSWORD, ~/.pgpass). The gateways
          on PostgreSQL need the receipt seal key the SQLite one used (README, "Moving to PostgreSQL").
        """

    func run(_ args: inout CommandLineArguments) async throws -> Int32 {
        let path = try LedgerFileArguments.sqlitePath(&args, option: "--from")
        guard let url = try args.value("--to") else { throw UsageError(message: "migrate-storage needs --to postgres://…") }
        guard case .postgres = LedgerStorage(url) else { throw UsageError(message: "--to must be a postgres:// URL") }
        let timeout = try LedgerFileArguments.timeout(&args)
        try args.finish()
        let report = try await LedgerFileArguments.onThreadOfItsOwn("migrate", timeout) { () throws(VerificationError) in
            try StorageMigration.copy(fromSQLite: path, toPostgres: url)
        }
        print(report.json.jsonText)
        return report.source == report.destination ? 0 : 1
    }
}
