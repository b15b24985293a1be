import Foundation
import IAPCore

/// PostgreSQL behind libpq: placeholder until the libpq backend lands (issue 6, in progress).
final class PostgresDatabase: SQLDatabase, @unchecked Sendable {
    static func handles(_ storage: String) -> Bool {
        storage.hasPrefix("postgres://") || storage.hasPrefix("postgresql://")
    }

    var dialect: SQLDialect { .postgres }

    init(url: String, migrations: [String]) throws(VerificationError) {
        throw VerificationError(.storageUnavailable, "storage: the PostgreSQL ledger is not in this build")
    }

    func withConnection<R: Sendable>(_ body: (any SQLConnection) throws(VerificationError) -> R)
        throws(VerificationError) -> R { fatalError("unreachable: init throws") }
    func transaction<R: Sendable>(_ body: (any SQLConnection) throws(VerificationError) -> R)
        throws(VerificationError) -> R { fatalError("unreachable: init throws") }
    func withDurableConnection<R: Sendable>(_ body: (any SQLConnection) throws(VerificationError) -> R)
        throws(VerificationError) -> R { fatalError("unreachable: init throws") }
}

enum PostgresLedgerSchema {
    static let migrations: [String] = []
}
