import IAPCore
import XCTest

/// Each row of a canonical record's field table names its property twice (the function that reads
/// it and the key path that writes it, `RecordField`): a row whose two spellings disagree would
/// map Apple's value into one property and write another into canonical JSON. Every row is
/// written with a value of its type and read back, and no other row may see the write. The
/// ledger's canonical text, written from the fields in key order, is the JSON value's text.
final class RecordFieldTests: XCTestCase {
    func testEveryTransactionFieldReadsWhatItWrites() {
        check(CanonicalTransaction(transactionId: "t", productId: "p", source: "s", mappingVersion: "m"))
    }

    func testEveryRenewalFieldReadsWhatItWrites() {
        check(CanonicalRenewal(originalTransactionId: "o", source: "s", mappingVersion: "m"))
    }

    func testEveryAppTransactionFieldReadsWhatItWrites() {
        check(CanonicalAppTransaction(bundleId: "b", source: "s", mappingVersion: "m"))
    }

    /// The ledger's canonical text is written member by member in a static key order: byte for
    /// byte the sorted-key text of `jsonValue`, for a bare record and for one with every field set.
    func testJSONTextIsTheJSONValuesTextWithEveryFieldSetOrNone() {
        same(CanonicalTransaction(transactionId: "t", productId: "p", source: "serverAPI", mappingVersion: "serverAPI/v2"))
        same(CanonicalRenewal(originalTransactionId: "o", source: "verifyReceipt", mappingVersion: "verifyReceipt/v1"))
        same(CanonicalAppTransaction(bundleId: "b", source: "serverAPI", mappingVersion: "serverAPI/v2"))
    }

    private func same<R: CanonicalRecord>(_ base: R, file: StaticString = #filePath, line: UInt = #line) {
        var full = base
        for field in R.fields { field.write(&full, Self.sample(field.type, distinctFrom: field.read(base))) }
        for record in [base, full] {
            XCTAssertEqual(record.jsonText, record.jsonValue.jsonText, file: file, line: line)
        }
        XCTAssertEqual(R.fieldsInKeyOrder.map(\.name), (R.fields.map(\.name) + ["source", "mappingVersion"]).sorted(),
                       file: file, line: line)
    }

    private func check<R: CanonicalRecord>(_ base: R, file: StaticString = #filePath, line: UInt = #line) {
        let fields = R.fields
        XCTAssertEqual(Set(fields.map(\.name)).count, fields.count, "a field is named twice", file: file, line: line)
        let before = fields.map { $0.read(base) }
        for (i, field) in fields.enumerated() {
            let value = Self.sample(field.type, distinctFrom: before[i])
            var record = base
            field.write(&record, value)
            XCTAssertEqual(field.read(record), value, "\(field.name) does not read what it writes", file: file, line: line)
            for (j, other) in fields.enumerated() where j != i {
                XCTAssertEqual(other.read(record), before[j], "writing \(field.name) changed \(other.name)", file: file, line: line)
            }
        }
    }

    /// A value of `type` unlike the record's current one (a required field already holds a value).
    private static func sample(_ type: RecordFieldType, distinctFrom current: JSONValue?) -> JSONValue {
        switch type {
        case .string: current == .string("written") ? "written again" : "written"
        case .integer: current == .int(4242) ? 4343 : 4242
        case .boolean: current == .bool(true) ? false : true
        case .object: .object(["member": 1])
        case .stringArray: .array(["offer-a", "offer-b"])
        }
    }
}
