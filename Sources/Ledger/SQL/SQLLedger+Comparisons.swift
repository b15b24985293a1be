import Foundation
import IAPCore

extension SQLLedger {
    public static let maxComparisonLimit = 1000

    public func recordComparison(_ c: PurchaseComparison) throws(VerificationError) {
        let productIds = Set(c.productIds + c.differences.compactMap(\.productId)).sorted()
        try database.transaction { (connection) throws(VerificationError) in
            // Two instances storing the same comparison take turns: each replaces it whole.
            try connection.serializeTransaction(on: "comparison:\(c.id)")
            try connection.run("DELETE FROM comparison_differences WHERE comparison_id = ?", .text(c.id))
            try connection.run("DELETE FROM comparison_purchases WHERE comparison_id = ?", .text(c.id))
            try connection.run("DELETE FROM comparisons WHERE id = ?", .text(c.id))
            try connection.run("""
                INSERT INTO comparisons (id, bundle_id, compared_at, evidence_kind, evidence_sha256,
                    legacy_mapping_version, server_api_mapping_version, transaction_count, legacy_error,
                    server_api_error, agreed, product_ids, account, environment, app_version)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, .text(c.id), .text(c.bundleId), .integer(c.comparedAt), .text(c.evidenceKind),
                .text(c.evidenceSHA256), .text(c.legacyMappingVersion), .text(c.serverAPIMappingVersion),
                .integer(Int64(c.transactionCount)), .text(c.legacyError), .text(c.serverAPIError),
                .integer(c.agreed ? 1 : 0), .text(JSONValue.array(productIds.map(JSONValue.string)).jsonText),
                .text(c.account), .text(c.environment), .text(c.appVersion))
            for p in c.purchases {
                try connection.run("""
                    INSERT INTO comparison_purchases (comparison_id, original_transaction_id, product_id, product_type,
                        legacy_state, legacy_expires_at, server_api_state, server_api_expires_at, agreed)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, .text(c.id), .text(p.originalTransactionId), .text(p.productId), .text(p.productType),
                    .text(p.legacyState?.rawValue), .integer(p.legacyExpiresDate), .text(p.serverAPIState?.rawValue),
                    .integer(p.serverAPIExpiresDate), .integer(p.agreed ? 1 : 0))
            }
            for (position, d) in c.differences.enumerated() {
                try connection.run("""
                    INSERT INTO comparison_differences (comparison_id, position, kind, transaction_id, product_id,
                        field, legacy_value, server_api_value) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """, .text(c.id), .integer(Int64(position)), .text(d.kind.rawValue), .text(d.transactionId),
                    .text(d.productId), .text(d.field), .text(d.legacyValue), .text(d.serverAPIValue))
            }
        }
    }

    public func comparisons(_ q: ComparisonQuery) throws(VerificationError) -> [PurchaseComparison] {
        let limit = Int64(min(max(0, q.limit), Self.maxComparisonLimit))
        let needsDifference = q.kind != nil || q.field != nil
        // Fixed placeholders with "CAST(? AS type) IS NULL OR" keep the statement static whatever the filters
        // (the CAST tells PostgreSQL the type of a parameter used only there; SQLite reads it the same).
        return try database.withConnection { (connection) throws(VerificationError) in
            var rows = try connection.query("""
                SELECT c.id, c.compared_at, c.evidence_kind, c.evidence_sha256, c.legacy_mapping_version,
                       c.server_api_mapping_version, c.transaction_count, c.legacy_error, c.server_api_error, c.product_ids,
                       c.account, c.environment, c.app_version
                FROM comparisons c
                WHERE c.bundle_id = ? AND (CAST(? AS BIGINT) IS NULL OR c.compared_at >= ?)
                  AND (CAST(? AS BIGINT) IS NULL OR c.compared_at <= ?)
                  AND (? = 0 OR EXISTS (SELECT 1 FROM comparison_differences d WHERE d.comparison_id = c.id
                        AND (CAST(? AS TEXT) IS NULL OR d.kind = ?) AND (CAST(? AS TEXT) IS NULL OR d.field = ?)
                        AND (CAST(? AS TEXT) IS NULL OR d.product_id = ?)))
                  AND (CAST(? AS TEXT) IS NULL OR \(connection.dialect.jsonArrayContains("c.product_ids"))
                        OR EXISTS (SELECT 1 FROM comparison_differences d WHERE d.comparison_id = c.id AND d.product_id = ?))
                  AND (CAST(? AS TEXT) IS NULL OR c.legacy_error = ? OR c.server_api_error = ?)
                ORDER BY c.compared_at DESC, c.id LIMIT ?
                """, .text(q.bundleId), .integer(q.from), .integer(q.from), .integer(q.to), .integer(q.to),
                .integer(needsDifference ? 1 : 0), .text(q.kind?.rawValue), .text(q.kind?.rawValue),
                .text(q.field), .text(q.field), .text(q.productId), .text(q.productId),
                .text(q.productId), .text(q.productId), .text(q.productId),
                .text(q.failureCode), .text(q.failureCode), .text(q.failureCode), .integer(limit)) {
                (row) throws(VerificationError) in
                var c = PurchaseComparison(
                    id: try row.requiredText(0), bundleId: q.bundleId, comparedAt: try row.requiredInteger(1),
                    evidenceKind: try row.requiredText(2), evidenceSHA256: try row.requiredText(3),
                    legacyMappingVersion: row.text(4), serverAPIMappingVersion: row.text(5),
                    transactionCount: Int(try row.requiredInteger(6)), differences: [],
                    legacyError: row.text(7), serverAPIError: row.text(8),
                    productIds: try Self.comparisonStrings(try row.requiredText(9)))
                c.account = row.text(10)
                c.environment = row.text(11)
                c.appVersion = row.text(12)
                return c
            }
            for i in rows.indices {
                rows[i].differences = try connection.query("""
                    SELECT kind, transaction_id, product_id, field, legacy_value, server_api_value
                    FROM comparison_differences WHERE comparison_id = ? ORDER BY position
                    """, .text(rows[i].id)) { (row) throws(VerificationError) in
                    guard let kind = ComparisonDifference.Kind(rawValue: try row.requiredText(0)) else { throw SQLRow.corrupt }
                    return ComparisonDifference(kind: kind, transactionId: try row.requiredText(1), productId: row.text(2),
                                                field: row.text(3), legacyValue: row.text(4), serverAPIValue: row.text(5))
                }
                rows[i].purchases = try connection.query("""
                    SELECT original_transaction_id, product_id, product_type, legacy_state, legacy_expires_at,
                           server_api_state, server_api_expires_at, agreed
                    FROM comparison_purchases WHERE comparison_id = ? ORDER BY original_transaction_id
                    """, .text(rows[i].id)) { (row) throws(VerificationError) in
                    func state(_ column: Int32) throws(VerificationError) -> Entitlement.State? {
                        guard let raw = row.text(column) else { return nil }
                        guard let state = Entitlement.State(rawValue: raw) else { throw SQLRow.corrupt }
                        return state
                    }
                    return ComparedPurchase(
                        originalTransactionId: try row.requiredText(0), productId: try row.requiredText(1),
                        productType: row.text(2), legacyState: try state(3), legacyExpiresDate: row.integer(4),
                        serverAPIState: try state(5), serverAPIExpiresDate: row.integer(6), agreed: try row.requiredInteger(7) != 0)
                }
            }
            return rows
        }
    }

    private static func comparisonStrings(_ json: String) throws(VerificationError) -> [String] {
        guard let values = try? JSONDecoder().decode([String].self, from: Data(json.utf8)) else { throw SQLRow.corrupt }
        return values
    }

    public func comparisonCounts(bundleId: String, from: Int64?, to: Int64?) throws(VerificationError) -> ComparisonCounts {
        try database.withConnection { (connection) throws(VerificationError) in
            let counts = try connection.query("""
                SELECT COUNT(*), COALESCE(SUM(agreed), 0) FROM comparisons
                WHERE bundle_id = ? AND (CAST(? AS BIGINT) IS NULL OR compared_at >= ?)
                  AND (CAST(? AS BIGINT) IS NULL OR compared_at <= ?)
                """, .text(bundleId), .integer(from), .integer(from), .integer(to), .integer(to)) {
                (row) throws(VerificationError) in
                ComparisonCounts(total: Int(try row.requiredInteger(0)), agreed: Int(try row.requiredInteger(1)))
            }
            return counts.first ?? ComparisonCounts(total: 0, agreed: 0)
        }
    }
}
