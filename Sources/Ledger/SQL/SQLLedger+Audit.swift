import Foundation
import IAPCore

extension SQLLedger {
    public func recordAudit(_ record: AuditRecord) throws(VerificationError) {
        try database.withConnection { (connection) throws(VerificationError) in
            try Self.insertAudit(record, connection)
        }
    }

    static func insertAudit(_ record: AuditRecord, _ connection: any SQLConnection) throws(VerificationError) {
        // The digest's shape is checked so that no caller can slip the evidence itself into the log.
        let digest = record.evidenceSHA256
        guard digest.utf8.count == 64, digest.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else {
            throw VerificationError(.internalError, "storage: audit evidence digest is not lowercase hex SHA-256")
        }
        try connection.run("""
            INSERT INTO audit_log (time, bundle_id, account, evidence_kind, evidence_sha256, transaction_ids,
                                   product_ids, environment, verdict, error_code, adapter, latency_micros)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, .integer(record.time), .text(record.bundleId), .text(record.account), .text(record.evidenceKind),
            .text(digest), .text(try jsonArray(record.transactionIds)), .text(try jsonArray(record.productIds)),
            .text(record.environment), .text(record.verdict.rawValue), .text(record.errorCode?.rawValue),
            .text(record.adapter), .integer(record.latencyMicros))
    }

    public func auditRecords(bundleId: String, limit: Int) throws(VerificationError) -> [AuditRecord] {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT time, account, evidence_kind, evidence_sha256, transaction_ids, product_ids, environment,
                       verdict, error_code, adapter, latency_micros
                FROM audit_log WHERE bundle_id = ? ORDER BY id DESC LIMIT ?
                """, .text(bundleId), .integer(Int64(max(0, limit)))) { (row) throws(VerificationError) in
                guard let verdict = AuditVerdict(rawValue: try row.requiredText(7)) else { throw SQLRow.corrupt }
                return AuditRecord(
                    time: try row.requiredInteger(0), bundleId: bundleId, account: row.text(1),
                    evidenceKind: try row.requiredText(2), evidenceSHA256: try row.requiredText(3),
                    transactionIds: try Self.strings(try row.requiredText(4)),
                    productIds: try Self.strings(try row.requiredText(5)), environment: row.text(6),
                    verdict: verdict, errorCode: row.text(8).map { VerificationError.Code(rawValue: $0) },
                    adapter: row.text(9), latencyMicros: try row.requiredInteger(10))
            }
        }
    }

    private static func jsonArray(_ values: [String]) throws(VerificationError) -> String {
        JSONValue.array(values.map(JSONValue.string)).jsonText
    }

    private static func strings(_ json: String) throws(VerificationError) -> [String] {
        guard let values = try? JSONDecoder().decode([String].self, from: Data(json.utf8)) else { throw SQLRow.corrupt }
        return values
    }
}
