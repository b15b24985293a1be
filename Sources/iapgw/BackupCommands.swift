import CommandLineSupport
import Foundation
import IAPConfig
import IAPCore
import Ledger

/// `iapgw backup`: an online copy of the SQLite ledger while the gateway serves (SQLite's backup API).
struct BackupCommand: Subcommand {
    let name = "backup"
    let summary = "copy the SQLite ledger to a file while the gateway serves, checked"
    let usage = """
        usage: iapgw backup --to FILE [--config DIR | --from sqlite:PATH] [--timeout SECONDS]
          copies the ledger named by the gateway file's storageURL (or --from) as of one commit, checks
          the copy (PRAGMA integrity_check) and renames it to FILE; prints each table's row count and
          SHA-256. PostgreSQL ledgers are backed up with pg_dump (README, "Backups").
          The receipt seal key (receipt-seal.key beside the ledger, or IAPGW_RECEIPT_SEAL_KEY) is not
          in the copy: keep it apart, without it the stored receipts cannot be read.
        """

    func run(_ args: inout CommandLineArguments) async throws -> Int32 {
        try await LedgerFileArguments.copy(&args, "backup", file: "--to", ledger: "--from") { file, source throws(VerificationError) in
            try SQLiteBackup.backup(from: source, to: file)
        }
    }
}

/// `iapgw restore`: a backup put back in place of a ledger that nothing uses.
struct RestoreCommand: Subcommand {
    let name = "restore"
    let summary = "put a backup in place of the SQLite ledger (refused while it is in use)"
    let usage = """
        usage: iapgw restore --from FILE (--to [sqlite:]PATH | --config DIR) [--timeout SECONDS]
          checks FILE (integrity, schema version), refuses while the ledger at PATH is in use (a gateway
          serving it, or any process with it open), keeps a ledger already there as PATH.replaced-<ms>,
          and puts the backup in its place; prints each table's row count and SHA-256.
          Run it as the gateway's user (runuser -u iapgw --): the restored file is the runner's, mode 0600.
        """

    func run(_ args: inout CommandLineArguments) async throws -> Int32 {
        try await LedgerFileArguments.copy(&args, "restore", file: "--from", ledger: "--to") { file, path throws(VerificationError) in
            try SQLiteBackup.restore(from: file, to: path)
        }
    }
}

/// The arguments and the running that the ledger file commands share.
enum LedgerFileArguments {
    /// The SQLite ledger named by `option` (`sqlite:PATH` or a plain path) or, without it, by the
    /// gateway file's `storageURL` in `--config` (default `Config`).
    static func sqlitePath(_ args: inout CommandLineArguments, option: String) throws -> String {
        let given = try args.value(option)
        let config = try args.value("--config")
        if given != nil, config != nil { throw UsageError(message: "\(option) and --config exclude each other") }
        let storage: LedgerStorage
        if let given {
            storage = LedgerStorage(given)
        } else {
            let directory = URL(fileURLWithPath: config ?? "Config", isDirectory: true)
            let gatewayFile = try ConfigLoader.findGatewayFile(configDirectory: directory)
            storage = try gatewayFile.map { file throws(VerificationError) in try ConfigLoader.loadGateway(file: file).storage }
                ?? GatewayConfig(appsDirectory: directory.appendingPathComponent("apps")).storage
        }
        guard case .sqlite(let path) = storage, !path.isEmpty else {
            throw UsageError(message: "\(option) must name an SQLite ledger (PostgreSQL: pg_dump and pg_restore)")
        }
        return path
    }

    static func timeout(_ args: inout CommandLineArguments) throws -> Duration {
        guard let text = try args.value("--timeout") else { return .seconds(3_600) }
        guard let seconds = Int(text), (1...86_400).contains(seconds) else {
            throw UsageError(message: "--timeout must be 1 to 86400 seconds")
        }
        return .seconds(seconds)
    }

    /// The run both commands share: the file named by `fileOption`, the ledger behind `ledgerOption`
    /// (or `--config`), `--timeout`; then `copy(file, ledger)` on a thread of its own, and each
    /// table's row count and SHA-256 printed.
    static func copy(_ args: inout CommandLineArguments, _ purpose: String, file fileOption: String, ledger ledgerOption: String,
                     _ copy: @escaping @Sendable (_ file: String, _ ledger: String) throws(VerificationError) -> LedgerDigest)
        async throws -> Int32 {
        guard let file = try args.value(fileOption) else { throw UsageError(message: "\(purpose) needs \(fileOption) FILE") }
        let ledger = try sqlitePath(&args, option: ledgerOption)
        let deadline = try timeout(&args)
        try args.finish()
        let digest = try await onThreadOfItsOwn(purpose, deadline) { () throws(VerificationError) in try copy(file, ledger) }
        print(JSONValue.object(["tables": digest.json]).jsonText)
        return 0
    }

    /// Runs the blocking copy on a thread of its own (SQLite and libpq block), answered within `timeout`.
    static func onThreadOfItsOwn<R: Sendable>(_ purpose: String, _ timeout: Duration,
                                              _ body: @escaping @Sendable () throws(VerificationError) -> R) async throws -> R {
        let executor = BlockingExecutor(purpose: purpose, unavailable: .storageUnavailable,
                                        limits: .init(threads: 1, queueCapacity: 1, deadline: timeout))
        return try await executor.run(body)
    }
}
