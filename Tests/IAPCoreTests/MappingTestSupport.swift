import Foundation
import IAPMapping
import XCTest
import IAPCore

/// Paths and small builders shared by the mapping tests. Mappings/ is found relative to this file
/// so the tests read the files the gateway ships, not copies.
enum MappingTestSupport {
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let mappingsDirectory = packageRoot.appendingPathComponent("Mappings")
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/mapping")

    static func shipped() throws -> MappingSet { try MappingSet.load(directory: mappingsDirectory) }

    static func fixture(_ name: String) throws -> JSONValue {
        try StrictJSON().parse(Data(contentsOf: fixtures.appendingPathComponent(name)))
    }

    static func json(_ text: String) throws -> JSONValue { try StrictJSON().parse(text) }

    /// A serverAPI-source file whose `transaction` kind has `rules` (plus the two required id
    /// rules unless `withIds` is false); the other kinds are minimal.
    static func serverFile(rules: String, withIds: Bool = true, version: String = "v1") throws -> MappingFile {
        let ids = withIds ? """
            {"from": "tid", "to": "transactionId", "convert": "string"},
            {"from": "pid", "to": "productId", "convert": "string"},
            """ : ""
        let all = rules.isEmpty ? String(ids.trimmingCharacters(in: .whitespacesAndNewlines).dropLast()) : ids + rules
        return try MappingFile.parse(Array(serverFileText(rules: all, version: version).utf8), file: "test.json")
    }

    static func serverFileText(rules: String, version: String = "v1") -> String {
        """
        {"source": "serverAPI", "version": "\(version)", "records": {
          "transaction": {"target": "transaction", "rules": [\(rules)]},
          "renewalInfo": {"target": "renewal", "rules": [{"from": "otid", "to": "originalTransactionId", "convert": "string"}]},
          "appTransaction": {"target": "appTransaction", "rules": [{"from": "bundleId", "to": "bundleId", "convert": "string"}]}
        }}
        """
    }

    /// Normalises `{"tid": "t", "pid": "p", <fields>}` with a file holding `rules`.
    static func transaction(rules: String, fields: String) throws -> Mapped<CanonicalTransaction> {
        let normalizer = try ServerAPINormalizer(serverFile(rules: rules))
        let comma = fields.isEmpty ? "" : ","
        return try normalizer.normalizeReporting(transaction: json(#"{"tid": "t", "pid": "p"\#(comma)\#(fields)}"#))
    }

    /// Runs `body`, which must throw a VerificationError, and returns it.
    static func error(_ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line) -> VerificationError? {
        do {
            try body()
            XCTFail("expected a VerificationError", file: file, line: line)
        } catch let error as VerificationError {
            return error
        } catch {
            XCTFail("unexpected error \(error)", file: file, line: line)
        }
        return nil
    }
}
