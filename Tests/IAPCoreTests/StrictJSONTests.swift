import XCTest
import Foundation
@testable import IAPCore

final class StrictJSONTests: XCTestCase {
    let json = StrictJSON()

    func code(_ text: String, parser: StrictJSON = StrictJSON()) -> VerificationError.Code? {
        do { _ = try parser.parse(text); return nil } catch { return error.code }
    }

    func testParsesEveryJSONTypeAndKeepsLargeIntegersExact() throws {
        let v = try json.parse(#"{"a":null,"b":true,"c":false,"d":9007199254740993,"e":-1.5e2,"f":"x\u00e9\ud83d\ude00\n","g":[1,{}]}"#)
        XCTAssertEqual(v["a"], .null)
        XCTAssertEqual(v["b"], .bool(true))
        XCTAssertEqual(v["c"], .bool(false))
        XCTAssertEqual(v["d"], .int(9_007_199_254_740_993))
        XCTAssertEqual(v["e"], .double(-150))
        XCTAssertEqual(v["f"], .string("xé😀\n"))
        XCTAssertEqual(v["g"], .array([.int(1), .object([:])]))
    }

    func testDuplicateKeysAreRefusedNotLastOneWins() {
        XCTAssertEqual(code(#"{"bundleId":"a","bundleId":"b"}"#), .duplicateJSONKey)
        XCTAssertEqual(code(#"{"x":{"k":1,"k":1}}"#), .duplicateJSONKey)
        // The same key spelled with an escape is the same key.
        XCTAssertEqual(code(#"{"ab":1,"a\u0062":2}"#), .duplicateJSONKey)
    }

    func testMalformedInputIsRefused() {
        for bad in ["", "{", "[1,]", "{\"a\":1,}", "01", "1.", "-", "tru", "\"\u{01}\"", "\"\\x\"",
                    "\"\\ud800\"", "\"\\udc00x\"", "{} x", "{'a':1}", "NaN", "1e999", "99999999999999999999"] {
            XCTAssertEqual(code(bad), .malformedJSON, "accepted \(bad.debugDescription)")
        }
    }

    func testInvalidUTF8IsRefused() {
        XCTAssertThrowsError(try json.parse([0x22, 0xFF, 0x22])) { XCTAssertEqual(($0 as? VerificationError)?.code, .malformedJSON) }
    }

    func testSizeAndDepthLimits() {
        XCTAssertEqual(code("[1,2,3]", parser: StrictJSON(maxBytes: 4)), .inputTooLarge)
        // Every entry point keeps the limit: the array one (a JWS payload) and the generic one.
        let bytes = Array("[1,2,3]".utf8), small = StrictJSON(maxBytes: 4)
        for (name, parse) in [("array", { _ = try small.parse(bytes) }), ("slice", { _ = try small.parse(bytes[...]) }),
                              ("data", { _ = try small.parse(Data(bytes)) })] as [(String, () throws -> Void)] {
            XCTAssertThrowsError(try parse(), name) { XCTAssertEqual(($0 as? VerificationError)?.code, .inputTooLarge, name) }
        }
        XCTAssertEqual(try StrictJSON(maxBytes: 7).parse(bytes), .array([1, 2, 3]))
        let deep = String(repeating: "[", count: 40) + String(repeating: "]", count: 40)
        XCTAssertEqual(code(deep, parser: StrictJSON(maxDepth: 32)), .malformedJSON)
        XCTAssertNil(code(deep, parser: StrictJSON(maxDepth: 40)))
    }

    func testJSONTextIsStableAndRoundTrips() throws {
        let v = try json.parse(#"{"z":1,"a":["q\"\\",2.5,null],"m":{"k":false}}"#)
        XCTAssertEqual(v.jsonText, #"{"a":["q\"\\",2.5,null],"m":{"k":false},"z":1}"#)
        XCTAssertEqual(try json.parse(v.jsonText), v)
    }

    /// The byte writer (what an HTTP answer sends) writes every escape, integer extreme and non-ASCII
    /// scalar as JSON, byte for byte the text, and StrictJSON reads each back to the same value.
    func testJSONBytesEscapeControlCharactersAndWriteIntegersExactly() throws {
        let v = JSONValue.object([
            "s": .string("q\"\\\n\r\t\u{01}\u{1f} é😀/"), "min": .int(Int64.min), "max": .int(Int64.max), "zero": .int(0),
            "neg": .int(-42), "a": .array([.bool(true), .null, .double(0.5), .object([:]), .array([])]),
        ])
        let expected = #"{"a":[true,null,0.5,{},[]],"max":9223372036854775807,"min":-9223372036854775808,"#
            + #""neg":-42,"s":"q\"\\\n\r\t\u0001\u001f é😀/","zero":0}"#
        XCTAssertEqual(String(decoding: v.jsonBytes, as: UTF8.self), expected)
        XCTAssertEqual(v.jsonText, expected)
        XCTAssertEqual(try json.parse(expected), v)
        for i: Int64 in [1, 9, 10, 99, 100, -1, -10, 1_234_567_890] {
            XCTAssertEqual(JSONValue.int(i).jsonBytes, Array(String(i).utf8))
        }
    }

    /// Strings short (stored inline) and long (on the heap), ASCII and not, with the one character
    /// that needs escaping first, last or nowhere: each written exactly and read back.
    func testJSONBytesWriteShortAndLongStringsWithAndWithoutEscapes() throws {
        for body in ["", "a", "é😀", String(repeating: "x", count: 15), String(repeating: "ü", count: 40),
                     String(repeating: "eyJhbGciOiJFUzI1NiJ9", count: 250)] {
            for (text, written) in [(body, body), ("\"" + body, "\\\"" + body), (body + "\n", body + "\\n"),
                                    (body + "\\", body + "\\\\"), (body + "\u{7}", body + "\\u0007")] {
                XCTAssertEqual(String(decoding: JSONValue.string(text).jsonBytes, as: UTF8.self), "\"" + written + "\"")
                XCTAssertEqual(try json.parse(Array(JSONValue.array([.string(text)]).jsonBytes)), .array([.string(text)]))
            }
        }
    }

    func testFieldReadsAreStrictAboutJSONTypes() throws {
        let fields = try JSONFields(try json.parse(#"{"signedDate":"1700000000000","price":230000,"ok":true,"n":null}"#),
                                    context: "payload")
        XCTAssertThrowsError(try fields.int64("signedDate")) {
            XCTAssertEqual(($0 as? VerificationError)?.code, .invalidFieldType)
        }
        XCTAssertEqual(try fields.int64("price"), 230000)
        XCTAssertThrowsError(try fields.string("price")) {
            XCTAssertEqual(($0 as? VerificationError)?.code, .invalidFieldType)
        }
        XCTAssertEqual(try fields.bool("ok"), true)
        XCTAssertNil(try fields.int64("n"))
        XCTAssertThrowsError(try fields.requiredString("absent")) {
            XCTAssertEqual(($0 as? VerificationError)?.code, .missingField)
        }
    }
}

final class CanonicalModelTests: XCTestCase {
    func testUnknownAppleEnumValuesDecodeWithTheirRawValueKept() throws {
        let data = Data(#"{"type":"Brand-New Kind","environment":"Production","offerType":9,"transactionId":"1","productId":"p","source":"serverAPI","mappingVersion":"serverAPI/v1"}"#.utf8)
        let t = try JSONDecoder().decode(CanonicalTransaction.self, from: data)
        XCTAssertEqual(t.type?.rawValue, "Brand-New Kind")
        XCTAssertEqual(t.type?.isKnown, false)
        XCTAssertEqual(t.environment, .production)
        XCTAssertEqual(t.offerType, OfferType(rawValue: 9))
        XCTAssertEqual(t.offerType?.isKnown, false)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let again = try JSONDecoder().decode(CanonicalTransaction.self, from: try encoder.encode(t))
        XCTAssertEqual(again, t)
    }

    func testErrorCodesAreUniqueAndUpperSnakeCase() {
        let raw = VerificationError.Code.all.map(\.rawValue)
        XCTAssertEqual(Set(raw).count, raw.count)
        for r in raw { XCTAssertNotNil(r.range(of: "^[A-Z][A-Z0-9_]+$", options: .regularExpression), r) }
        XCTAssertTrue(VerificationError(.revocationCheckUnavailable, "x").retryable)
        XCTAssertFalse(VerificationError(.invalidSignature, "x").retryable)
    }

    /// The README's error table is generated from the doc comment of each `VerificationError.Code`
    /// (`errorCodeTable`) and compared whole: every code once, in declaration order, each with a
    /// meaning, marked retryable exactly when `VerificationError.retryable` says so. On a
    /// difference the failure prints the table to paste.
    func testTheREADMEErrorTableIsExactlyTheGeneratedOne() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let generated = try Self.errorCodeTable(
            source: String(contentsOf: root.appendingPathComponent("Sources/IAPCore/VerificationError.swift"), encoding: .utf8))
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let start = try XCTUnwrap(readme.firstIndex(of: "| code | meaning |"), "README has no error table")
        let table = Array(readme[start...].prefix { $0.hasPrefix("|") })
        XCTAssertEqual(table, generated, "README's error table is not the generated one; paste:\n" + generated.joined(separator: "\n"))

        let rows = generated.dropFirst(2)
        XCTAssertEqual(rows.map { String($0.split(separator: "`")[1]) }, VerificationError.Code.all.map(\.rawValue),
                       "every code once, in declaration order")
        for (row, code) in zip(rows, VerificationError.Code.all) {
            XCTAssertFalse(row.hasSuffix("|  |") || row.hasPrefix("| `\(code.rawValue)` |  *("), "\(code.rawValue) has no meaning: give it a doc comment")
        }
    }

    /// The README table: one row per `public static let x = Code(rawValue: "X")`, its meaning the
    /// `///` lines just above it (plain `//` lines such as MARKs between them are skipped).
    static func errorCodeTable(source: String) -> [String] {
        var rows = ["| code | meaning |", "|---|---|"]
        var doc: [String] = []
        let constant = /public static let \w+ = Code\(rawValue: "(\w+)"\)/
        for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
            let text = line.trimmingCharacters(in: .whitespaces)
            if text.hasPrefix("///") {
                doc.append(text.dropFirst(3).trimmingCharacters(in: .whitespaces))
            } else if let match = text.wholeMatch(of: constant) {
                let code = VerificationError.Code(rawValue: String(match.1))
                let retryable = VerificationError(code, "").retryable ? " *(retryable)*" : ""
                rows.append("| `\(match.1)` | \(doc.joined(separator: " "))\(retryable) |")
                doc = []
            } else if !text.hasPrefix("//") {
                doc = []
            }
        }
        return rows
    }
}

final class CanonicalJSONTests: XCTestCase {
    /// The hand-written JSON must say exactly what JSONEncoder says, or stored and answered
    /// records would drift apart.
    func testCanonicalJSONMatchesJSONEncoder() throws {
        var t = CanonicalTransaction(transactionId: "2", productId: "p", source: "serverAPI", mappingVersion: "serverAPI/v1")
        t.originalTransactionId = "1"; t.webOrderLineItemId = "w"; t.bundleId = "b"; t.appAppleId = 9
        t.subscriptionGroupIdentifier = "g"; t.type = .autoRenewable; t.purchaseDate = 1; t.originalPurchaseDate = 2
        t.expiresDate = 3; t.quantity = 1; t.inAppOwnershipType = .familyShared; t.isUpgraded = false
        t.offerType = .winBack; t.offerIdentifier = "o"; t.offerDiscountType = .freeTrial; t.revocationDate = 4
        t.revocationReason = .appIssue; t.environment = .sandbox; t.appAccountToken = "a"; t.storefront = "USA"
        t.price = 990; t.currency = "USD"; t.transactionReason = .renewal; t.signedDate = 5
        var r = CanonicalRenewal(originalTransactionId: "1", source: "verifyReceipt", mappingVersion: "verifyReceipt/v1")
        r.productId = "p"; r.autoRenewProductId = "q"; r.autoRenewStatus = .on; r.expirationIntent = .billingError
        r.isInBillingRetryPeriod = true; r.gracePeriodExpiresDate = 6; r.priceIncreaseStatus = .consented
        r.offerType = .introductory; r.offerIdentifier = "o"; r.offerDiscountType = .payAsYouGo; r.renewalDate = 7
        r.renewalPrice = 8; r.currency = "EUR"; r.environment = .production; r.signedDate = 9
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        for (value, encoded) in [(t.jsonValue, try encoder.encode(t)), (r.jsonValue, try encoder.encode(r)),
                                 (CanonicalTransaction(transactionId: "x", productId: "y", source: "s", mappingVersion: "m").jsonValue,
                                  try encoder.encode(CanonicalTransaction(transactionId: "x", productId: "y", source: "s", mappingVersion: "m")))] {
            XCTAssertEqual(value, try StrictJSON().parse(Array(encoded)))
        }
    }

    func testLogTimestampsAreRFC3339UTCWithMilliseconds() {
        XCTAssertEqual(Logger.timestamp(Date(timeIntervalSince1970: 1_729_136_651.128)), "2024-10-17T03:44:11.128Z")
        XCTAssertEqual(Logger.timestamp(Date(timeIntervalSince1970: 0)), "1970-01-01T00:00:00.000Z")
    }
}
