import IAPCore

/// The disagreements (one row per finding), path failures (one row per failed path) and cutover
/// impact (one row per purchase chain a cutover changes: `classOrCode` the change, the two values
/// each path's state, `notFound` where its answer lacks the chain) of a `MigrationReport` as CSV
/// (RFC 4180), for a spreadsheet: `GET /dashboard?app=BUNDLE&format=csv` and `iapgw compare --csv
/// FILE`. Dates are UTC ISO-8601.
public enum MigrationReportCSV {
    public static let header = ["row", "comparisonId", "comparedAt", "environment", "account", "transactionId", "productId",
                                "classOrCode", "field", "path", "legacyValue", "serverAPIValue", "related"]

    public static func render(_ r: MigrationReport) -> String {
        var lines = [header.map(cell).joined(separator: ",")]
        let byId = Dictionary(r.comparisons.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        for row in r.rows {
            let c = byId[row.comparisonId]
            lines.append([
                "disagreement", row.comparisonId, MigrationReport.isoDate(row.comparedAt), c?.environment ?? "", c?.account ?? "",
                row.transactionId, row.productId ?? "", row.kind.rawValue, row.field ?? MigrationReport.wholeTransaction, "",
                value(row.legacyValue, row.field), value(row.serverAPIValue, row.field),
                row.related.compactMap(\.field).sorted().joined(separator: " "),
            ].map(cell).joined(separator: ","))
        }
        for c in r.comparisons {
            for (path, code) in [("verifyReceipt", c.legacyError), ("serverAPI", c.serverAPIError)] {
                guard let code else { continue }
                lines.append([
                    "failure", c.id, MigrationReport.isoDate(c.comparedAt), c.environment ?? "", c.account ?? "",
                    c.purchases.first?.originalTransactionId ?? "", c.productIds.joined(separator: " "), code, "", path, "", "", "",
                ].map(cell).joined(separator: ","))
            }
        }
        for row in r.impact {
            lines.append([
                "impact", row.comparisonId, byId[row.comparisonId].map { MigrationReport.isoDate($0.comparedAt) } ?? "",
                row.environment, row.account ?? "", row.originalTransactionId, row.productId, row.change.rawValue, "", "",
                row.legacyText, row.serverAPIText, "",
            ].map(cell).joined(separator: ","))
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    private static func value(_ v: String?, _ field: String?) -> String {
        guard let v else { return "" }
        if let field, MigrationReportHTML.isDate(field), let millis = Int64(v) { return MigrationReport.isoDate(millis) }
        return v
    }

    /// Quoted, quotes doubled; a cell a spreadsheet would run as a formula (= + - @, tab, CR) is
    /// prefixed with an apostrophe, since values come from receipts anyone can send.
    static func cell(_ text: String) -> String {
        var t = text
        if let first = t.unicodeScalars.first, "=+-@\t\r".unicodeScalars.contains(first) { t = "'" + t }
        return "\"" + t.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
