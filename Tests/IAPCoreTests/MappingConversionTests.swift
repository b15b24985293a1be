import IAPMapping
import XCTest
import IAPCore

/// Every conversion of the closed set, with values it accepts and values it refuses.
final class MappingConversionTests: XCTestCase {
    typealias S = MappingTestSupport

    private func refused(_ rules: String, _ fields: String, file: StaticString = #filePath, line: UInt = #line) -> VerificationError? {
        S.error({ _ = try S.transaction(rules: rules, fields: fields) }, file: file, line: line)
    }

    func testMsStringTurnsDigitsIntoMilliseconds() throws {
        let rule = #"{"from": "d", "to": "purchaseDate", "convert": "msString"}"#
        XCTAssertEqual(try S.transaction(rules: rule, fields: #""d": "1700000000000""#).record.purchaseDate, 1_700_000_000_000)
        for bad in [#""17e5""#, #""-1""#, #""""#, #"" 1""#, #""+1""#, #""99999999999999999999""#, "1700000000000", "true"] {
            XCTAssertEqual(refused(rule, #""d": \#(bad)"#)?.code, .invalidFieldType, bad)
        }
    }

    func testIntStringAcceptsSignedIntegersOnly() throws {
        let rule = #"{"from": "q", "to": "quantity", "convert": "intString"}"#
        XCTAssertEqual(try S.transaction(rules: rule, fields: #""q": "3""#).record.quantity, 3)
        XCTAssertEqual(try S.transaction(rules: rule, fields: #""q": "-2""#).record.quantity, -2)
        for bad in [#""abc""#, #""1.5""#, #""-""#, "3"] {
            XCTAssertEqual(refused(rule, #""q": \#(bad)"#)?.code, .invalidFieldType, bad)
        }
    }

    func testBoolStringAcceptsOnlyTrueFalseOneZero() throws {
        let rule = #"{"from": "u", "to": "isUpgraded", "convert": "boolString"}"#
        for (raw, expected) in [("true", true), ("1", true), ("false", false), ("0", false)] {
            XCTAssertEqual(try S.transaction(rules: rule, fields: #""u": "\#(raw)""#).record.isUpgraded, expected, raw)
        }
        for bad in [#""yes""#, #""TRUE""#, #""""#, "true", "1"] {
            XCTAssertEqual(refused(rule, #""u": \#(bad)"#)?.code, .invalidFieldType, bad)
        }
    }

    func testIntBoolAndStringRefuseOtherJSONTypes() throws {
        let rules = """
            {"from": "n", "to": "quantity", "convert": "int"},
            {"from": "b", "to": "isUpgraded", "convert": "bool"},
            {"from": "s", "to": "storefront", "convert": "string"}
            """
        let ok = try S.transaction(rules: rules, fields: #""n": 5, "b": true, "s": "USA""#).record
        XCTAssertEqual(ok.quantity, 5)
        XCTAssertEqual(ok.isUpgraded, true)
        XCTAssertEqual(ok.storefront, "USA")
        for bad in [#""n": "5""#, #""n": 5.0"#, #""b": "true""#, #""b": 1"#, #""s": 5"#, #""s": ["USA"]"#] {
            XCTAssertEqual(refused(rules, bad)?.code, .invalidFieldType, bad)
        }
    }

    func testFlagAppliesItsAssignmentsOnlyWhenTrue() throws {
        let rule = #"{"from": "trial", "convert": "flag", "set": {"offerType": 1, "offerDiscountType": "FREE_TRIAL"}}"#
        let on = try S.transaction(rules: rule, fields: #""trial": "true""#).record
        XCTAssertEqual(on.offerType, .introductory)
        XCTAssertEqual(on.offerDiscountType, .freeTrial)
        let off = try S.transaction(rules: rule, fields: #""trial": "false""#).record
        XCTAssertNil(off.offerType)
        XCTAssertNil(off.offerDiscountType)
        XCTAssertEqual(refused(rule, #""trial": "maybe""#)?.code, .invalidFieldType)
    }

    func testEnumMapsTableValuesAndKeepsUnknownRawValues() throws {
        let rule = #"{"from": "r", "to": "revocationReason", "convert": "enum", "values": {"0": 0, "1": 1}}"#
        XCTAssertEqual(try S.transaction(rules: rule, fields: #""r": "1""#).record.revocationReason, .appIssue)
        XCTAssertEqual(try S.transaction(rules: rule, fields: #""r": "0""#).record.revocationReason, .other)
        let unknown = try S.transaction(rules: rule, fields: #""r": "7""#).record.revocationReason
        XCTAssertEqual(unknown?.rawValue, 7)
        XCTAssertEqual(unknown?.isKnown, false)
        XCTAssertEqual(refused(rule, #""r": "abc""#)?.code, .invalidFieldType)
        XCTAssertEqual(refused(rule, #""r": true"#)?.code, .invalidFieldType)

        let stringRule = #"{"from": "o", "to": "inAppOwnershipType", "convert": "enum", "values": {"P": "PURCHASED"}}"#
        XCTAssertEqual(try S.transaction(rules: stringRule, fields: #""o": "P""#).record.inAppOwnershipType, .purchased)
        XCTAssertEqual(try S.transaction(rules: stringRule, fields: #""o": "NEW_KIND""#).record.inAppOwnershipType?.rawValue, "NEW_KIND")
    }

    func testConstantWritesItsValueWithoutInput() throws {
        let rule = #"{"to": "currency", "convert": "constant", "value": "USD"}"#
        XCTAssertEqual(try S.transaction(rules: rule, fields: "").record.currency, "USD")
    }

    func testNullIsTreatedAsAbsent() throws {
        let rule = #"{"from": "d", "to": "purchaseDate", "convert": "msString"}"#
        XCTAssertNil(try S.transaction(rules: rule, fields: #""d": null"#).record.purchaseDate)
    }

    func testMissingRequiredCanonicalFieldIsRefused() throws {
        let normalizer = try ServerAPINormalizer(S.serverFile(rules: ""))
        let error = S.error { _ = try normalizer.normalize(transaction: S.json(#"{"tid": "t"}"#)) }
        XCTAssertEqual(error?.code, .missingField)
        XCTAssertEqual(S.error { _ = try normalizer.normalize(transaction: S.json(#"["t"]"#)) }?.code, .invalidFieldType)
    }

    func testUndeclaredInputFieldsAreRecordedAndIgnoredOnesAreNot() throws {
        let rule = #"{"from": "old", "ignore": "superseded"}"#
        let mapped = try S.transaction(rules: rule, fields: #""old": 1, "brandNew": "x", "another": 2"#)
        XCTAssertEqual(mapped.unmappedFields, ["transaction.another", "transaction.brandNew"])
    }

    func testLaterRuleWinsWhenTwoRulesWriteTheSameField() throws {
        let rules = """
            {"from": "trial", "convert": "flag", "set": {"offerType": 1, "offerDiscountType": "FREE_TRIAL"}},
            {"from": "code", "to": "offerIdentifier", "convert": "string", "set": {"offerType": 3}}
            """
        let record = try S.transaction(rules: rules, fields: #""trial": "true", "code": "SPRING""#).record
        XCTAssertEqual(record.offerType, .offerCode)
        XCTAssertEqual(record.offerIdentifier, "SPRING")
        XCTAssertEqual(record.offerDiscountType, .freeTrial)
    }

    func testErrorsNameTheFieldButNotItsValue() throws {
        let rule = #"{"from": "token", "to": "quantity", "convert": "intString"}"#
        let error = refused(rule, #""token": "secret-looking-value""#)
        XCTAssertEqual(error?.code, .invalidFieldType)
        XCTAssertTrue(error?.message.contains("transaction.token") == true, error?.message ?? "")
        XCTAssertFalse(error?.message.contains("secret-looking-value") == true)
    }
}
