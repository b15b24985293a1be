import Foundation
import IAPCore

/// Versioned schema changes. Migration N (1-based) is `migrations[N - 1]`; a database records each
/// applied version in `schema_migrations`. Released migrations are never edited, only appended.
enum SchemaMigrator {
    static let bookkeeping = """
        CREATE TABLE IF NOT EXISTS schema_migrations (
            version BIGINT PRIMARY KEY,
            applied_at BIGINT NOT NULL
        )
        """

    /// Applies the missing migrations in one transaction, so a crash leaves the old schema intact
    /// and two processes opening a new file at once apply each migration exactly once.
    /// A database written by newer code is refused: this code cannot know what its rows mean.
    static func migrate(_ database: any SQLDatabase, migrations: [String]) throws(VerificationError) {
        let known = Int64(migrations.count)
        try database.transaction { (connection) throws(VerificationError) in
            // Instances starting together on one PostgreSQL database take turns (the table may not exist yet).
            try connection.serializeTransaction(on: "schema_migrations")
            try connection.executeScript(bookkeeping, operation: "create schema_migrations")
            let current = try connection.query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations") {
                (row) throws(VerificationError) in try row.requiredInteger(0)
            }.first ?? 0
            guard current <= known else {
                throw VerificationError(.storageUnavailable,
                    "storage: database schema version \(current) is newer than this build knows (\(known))")
            }
            guard current < known else { return }
            let now = Int64((Date().timeIntervalSince1970 * 1000).rounded())
            for version in (current + 1)...known {
                try connection.executeScript(migrations[Int(version - 1)], operation: "migration \(version)")
                try connection.run("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                                   .integer(version), .integer(now))
            }
        }
    }
}
