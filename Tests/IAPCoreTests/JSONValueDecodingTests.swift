import Foundation
import IAPCore
import XCTest

/// `JSONValueDecoding` reads as `JSONFields` does: the same strictness, the same codes and messages.
final class JSONValueDecodingTests: XCTestCase {
    struct Inner: Decodable, Equatable {
        let n: Int64?
    }

    struct Model: Decodable, Equatable {
        let id: String
        let count: Int64?
        let flag: Bool?
        let env: AppStoreEnvironment?
        let offer: OfferType?
        let ids: [String]?
        let inner: Inner?
        let whole: [String: JSONValue]?
        let small: Int8?
    }

    private func decode(_ json: JSONValue, check: JSONValueDecoding.IntegerCheck? = nil) throws -> Model {
        try JSONValueDecoding.decode(from: json, context: "m", checkingIntegers: check)
    }

    private func refusal(_ json: JSONValue, check: JSONValueDecoding.IntegerCheck? = nil) -> String? {
        do {
            _ = try decode(json, check: check)
            return nil
        } catch {
            return (error as? VerificationError)?.description
        }
    }

    func testMembersDecodeWithUnknownEnumValuesAndWholeObjectsKept() throws {
        let m = try decode(.object(["id": "a", "count": 2, "flag": false, "env": "Future", "offer": 9, "ids": .array(["x", "y"]),
                                    "inner": .object(["n": 3]), "whole": .object(["d": .double(1.5)]), "small": 7, "other": .null]))
        XCTAssertEqual(m, Model(id: "a", count: 2, flag: false, env: AppStoreEnvironment(rawValue: "Future"), offer: OfferType(rawValue: 9),
                                ids: ["x", "y"], inner: Inner(n: 3), whole: ["d": .double(1.5)], small: 7))
        XCTAssertEqual(try decode(.object(["id": "a", "count": .null])).count, nil)
    }

    func testRefusalsMatchJSONFields() {
        let cases: [(JSONValue, String)] = [
            (.string("x"), "INVALID_FIELD_TYPE: m must be a JSON object, found string"),
            (.object([:]), "MISSING_FIELD: m.id is required"),
            (.object(["id": .null]), "MISSING_FIELD: m.id is required"),
            (.object(["id": 1]), "INVALID_FIELD_TYPE: m.id must be a string, found integer"),
            (.object(["id": "a", "count": "2"]), "INVALID_FIELD_TYPE: m.count must be an integer, found string"),
            (.object(["id": "a", "count": .double(2)]), "INVALID_FIELD_TYPE: m.count must be an integer, found number"),
            (.object(["id": "a", "flag": 1]), "INVALID_FIELD_TYPE: m.flag must be a boolean, found integer"),
            (.object(["id": "a", "env": 1]), "INVALID_FIELD_TYPE: m.env must be a string, found integer"),
            (.object(["id": "a", "offer": "1"]), "INVALID_FIELD_TYPE: m.offer must be an integer, found string"),
            (.object(["id": "a", "ids": "x"]), "INVALID_FIELD_TYPE: m.ids must be an array, found string"),
            (.object(["id": "a", "ids": .array(["x", 1])]), "INVALID_FIELD_TYPE: m.ids must be an array of strings"),
            (.object(["id": "a", "inner": .array([])]), "INVALID_FIELD_TYPE: m.inner must be an object, found array"),
            (.object(["id": "a", "inner": .object(["n": true])]), "INVALID_FIELD_TYPE: m.inner.n must be an integer, found boolean"),
            (.object(["id": "a", "whole": 1]), "INVALID_FIELD_TYPE: m.whole must be an object, found integer"),
            (.object(["id": "a", "small": 300]), "INVALID_FIELD_TYPE: m.small 300 is out of range for Int8"),
        ]
        for (json, expected) in cases { XCTAssertEqual(refusal(json), expected, json.jsonText) }
    }

    func testTheIntegerCheckSeesEveryInt64MemberWithItsPath() {
        let check: JSONValueDecoding.IntegerCheck = { (key, value, path) throws(VerificationError) in
            if value < 0 { throw VerificationError(.invalidFieldType, "\(path()) (\(key)) is negative") }
        }
        XCTAssertEqual(refusal(.object(["id": "a", "inner": .object(["n": -1])]), check: check),
                       "INVALID_FIELD_TYPE: m.inner.n (n) is negative")
        XCTAssertNil(refusal(.object(["id": "a", "count": 1, "offer": -1]), check: check))
    }

    func testJSONFieldsFromADecoderIsRefusedForOtherDecoders() throws {
        struct ByHand: Decodable {
            let fields: JSONFields
            init(from decoder: any Decoder) throws { fields = try JSONFields(decoder) }
        }
        let fields = try JSONValueDecoding.decode(ByHand.self, from: .object(["a": 1]), context: "x").fields
        XCTAssertEqual(fields.context, "x")
        XCTAssertEqual(try fields.int64("a"), 1)
        XCTAssertThrowsError(try JSONDecoder().decode(ByHand.self, from: Data(#"{"a":1}"#.utf8))) {
            XCTAssertEqual(($0 as? VerificationError)?.code, .invalidFieldType)
        }
    }
}
