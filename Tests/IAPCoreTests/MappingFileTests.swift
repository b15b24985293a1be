import Foundation
import IAPMapping
import XCTest
import IAPCore

/// Loading and validating mapping files: broken files are refused with file, rule and reason; all
/// versions stay loadable; the shipped legacy file declares every field Apple documents.
final class MappingFileTests: XCTestCase {
    typealias S = MappingTestSupport

    private func invalid(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> VerificationError? {
        let error = S.error({ _ = try MappingFile.parse(Array(text.utf8), file: "broken.json") }, file: file, line: line)
        XCTAssertEqual(error?.code, .invalidMapping, file: file, line: line)
        XCTAssertTrue(error?.message.hasPrefix("broken.json: ") == true, error?.message ?? "", file: file, line: line)
        return error
    }

    private func invalidRules(_ rules: String, file: StaticString = #filePath, line: UInt = #line) -> String {
        invalid(S.serverFileText(rules: rules), file: file, line: line)?.message ?? ""
    }

    func testShippedFilesLoadWithTheirIds() throws {
        let set = try S.shipped()
        XCTAssertEqual(set.sources, ["serverAPI", "verifyReceipt"])
        XCTAssertEqual(set.latest(source: "verifyReceipt")?.id, "verifyReceipt/v1")
        XCTAssertEqual(set.file(id: "serverAPI/v1")?.id, "serverAPI/v1")
        XCTAssertNoThrow(try LegacyReceiptNormalizer(XCTUnwrap(set.latest(source: "verifyReceipt"))))
        XCTAssertNoThrow(try ServerAPINormalizer(XCTUnwrap(set.latest(source: "serverAPI"))))
    }

    func testUnknownConversionIsRefusedWithRuleIndexAndReason() {
        let message = invalidRules("""
            {"from": "a", "to": "transactionId", "convert": "string"},
            {"from": "q", "to": "quantity", "convert": "integer"}
            """)
        XCTAssertTrue(message.contains("records.transaction.rules[1] (from \"q\")"), message)
        XCTAssertTrue(message.contains("unknown conversion \"integer\""), message)
    }

    func testUnknownTargetFieldIsRefused() {
        let message = invalidRules(#"{"from": "a", "to": "transactionID", "convert": "string"}"#)
        XCTAssertTrue(message.contains("rules[0]"), message)
        XCTAssertTrue(message.contains("unknown transaction field \"transactionID\""), message)
        XCTAssertTrue(invalidRules(#"{"from": "a", "convert": "flag", "set": {"offerTipe": 1}}"#).contains("offerTipe"))
    }

    func testDuplicateFromIsRefused() {
        let message = invalidRules("""
            {"from": "a", "to": "transactionId", "convert": "string"},
            {"from": "a", "to": "productId", "convert": "string"}
            """)
        XCTAssertTrue(message.contains("rules[1]"), message)
        XCTAssertTrue(message.contains("duplicate \"from\": \"a\""), message)
    }

    func testDuplicateJSONKeyIsRefused() {
        let message = invalidRules(#"{"from": "a", "to": "transactionId", "to": "productId", "convert": "string"}"#)
        XCTAssertTrue(message.contains("DUPLICATE_JSON_KEY"), message)
        XCTAssertTrue(message.contains("\"to\""), message)
    }

    func testMissingOrMalformedVersionIsRefused() {
        XCTAssertTrue(invalid(#"{"source": "serverAPI", "records": {}}"#)?.message.contains("missing \"version\"") == true)
        XCTAssertTrue(invalid(#"{"version": "v1", "records": {}}"#)?.message.contains("missing \"source\"") == true)
        for bad in ["1", "v0", "v01", "version1", ""] {
            XCTAssertNotNil(invalid(#"{"source": "serverAPI", "version": "\#(bad)", "records": {"k": {"target": "renewal", "rules": []}}}"#), bad)
        }
    }

    func testConversionWhoseTypeDoesNotFitTheTargetIsRefused() {
        XCTAssertTrue(invalidRules(#"{"from": "d", "to": "bundleId", "convert": "msString"}"#).contains("yields a integer but bundleId is a string"))
        XCTAssertTrue(invalidRules(#"{"from": "d", "convert": "flag", "set": {"offerType": "1"}}"#).contains("must be a integer"))
        XCTAssertTrue(invalidRules(#"{"from": "r", "to": "revocationReason", "convert": "enum", "values": {"0": "zero"}}"#).contains("values.0"))
    }

    func testMalformedRulesAreRefused() {
        XCTAssertTrue(invalidRules(#"{"from": "a", "to": "productId", "convert": "string", "colour": 1}"#).contains("unknown key \"colour\""))
        XCTAssertTrue(invalidRules(#"{"from": "a", "convert": "string"}"#).contains("missing \"to\""))
        XCTAssertTrue(invalidRules(#"{"from": "a", "to": "productId"}"#).contains("convert"))
        XCTAssertTrue(invalidRules(#"{"from": "a", "ignore": "x", "to": "productId"}"#).contains("not allowed on an ignored field"))
        XCTAssertTrue(invalidRules(#"{"from": "a", "convert": "flag"}"#).contains("a flag needs \"set\""))
        XCTAssertTrue(invalidRules(#"{"from": "a", "nested": "nowhere"}"#).contains("nested kind \"nowhere\" is not declared"))
        XCTAssertTrue(invalid(#"{"source": "s", "version": "v1", "records": {"k": {"target": "receipt", "rules": []}}}"#)?
            .message.contains("unknown target \"receipt\"") == true)
        XCTAssertTrue(invalid(#"{"source": "s", "version": "v1", "records": {"k": {"target": "renewal", "inherit": ["nope"], "rules": []}}}"#)?
            .message.contains("records.k.inherit[0]") == true)
    }

    func testOversizedFileIsRefused() {
        let padding = String(repeating: " ", count: MappingFile.maxBytes)
        XCTAssertTrue(invalid(S.serverFileText(rules: "") + padding)?.message.contains("larger than") == true)
    }

    func testNormalisersRefuseAFileOfAnotherSourceOrMissingAKind() throws {
        let set = try S.shipped()
        XCTAssertEqual(S.error { _ = try LegacyReceiptNormalizer(XCTUnwrap(set.latest(source: "serverAPI"))) }?.code, .invalidMapping)
        XCTAssertEqual(S.error { _ = try ServerAPINormalizer(XCTUnwrap(set.latest(source: "verifyReceipt"))) }?.code, .invalidMapping)
        let partial = try MappingFile.parse(Array(#"""
            {"source": "serverAPI", "version": "v1", "records": {"transaction": {"target": "transaction", "rules": []}}}
            """#.utf8), file: "partial.json")
        let error = S.error { _ = try ServerAPINormalizer(partial) }
        XCTAssertEqual(error?.code, .invalidMapping)
        XCTAssertTrue(error?.message.contains("renewalInfo") == true, error?.message ?? "")
    }

    func testOldVersionStaysLoadableBesideANewOne() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mappings-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let serverDir = dir.appendingPathComponent("serverAPI")
        try FileManager.default.createDirectory(at: serverDir, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: S.mappingsDirectory.appendingPathComponent("serverAPI/v1.json"),
                                         to: serverDir.appendingPathComponent("v1.json"))
        let v2Rules = """
            {"from": "tid", "to": "transactionId", "convert": "string"},
            {"from": "pid", "to": "productId", "convert": "string"}
            """
        try S.serverFileText(rules: v2Rules, version: "v2").write(to: serverDir.appendingPathComponent("v2.json"),
                                                                  atomically: true, encoding: .utf8)
        let set = try MappingSet.load(directory: dir)
        XCTAssertEqual(set.versions(source: "serverAPI"), ["v1", "v2"])
        XCTAssertEqual(set.latest(source: "serverAPI")?.id, "serverAPI/v2")
        let v1 = try XCTUnwrap(set.version(source: "serverAPI", "v1"))
        let old = try ServerAPINormalizer(v1).normalize(transaction: S.json(#"{"transactionId": "1", "productId": "p"}"#))
        XCTAssertEqual(old.mappingVersion, "serverAPI/v1")
        let new = try ServerAPINormalizer(XCTUnwrap(set.latest(source: "serverAPI"))).normalize(transaction: S.json(#"{"tid": "1", "pid": "p"}"#))
        XCTAssertEqual(new.mappingVersion, "serverAPI/v2")
    }

    func testCheckReportsEachBrokenFileAndLoadRefusesTheSet() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mappings-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let serverDir = dir.appendingPathComponent("serverAPI")
        try FileManager.default.createDirectory(at: serverDir, withIntermediateDirectories: true)
        try S.serverFileText(rules: #"{"from": "a", "to": "productId", "convert": "bogus"}"#)
            .write(to: serverDir.appendingPathComponent("v1.json"), atomically: true, encoding: .utf8)
        try S.serverFileText(rules: #"{"from": "a", "to": "productId", "convert": "string"}"#, version: "v3")
            .write(to: serverDir.appendingPathComponent("v2.json"), atomically: true, encoding: .utf8)
        let outcomes = try MappingSet.check(directory: dir)
        XCTAssertEqual(outcomes.map { ($0.path as NSString).lastPathComponent }, ["v1.json", "v2.json"])
        guard case .failure(let bogus) = outcomes[0].result, case .failure(let misplaced) = outcomes[1].result else {
            return XCTFail("both files must fail")
        }
        XCTAssertTrue(bogus.message.contains("v1.json: records.transaction.rules[0] (from \"a\"): unknown conversion \"bogus\""), bogus.message)
        XCTAssertTrue(misplaced.message.contains("declares serverAPI/v3 but lives at serverAPI/v2"), misplaced.message)
        XCTAssertEqual(S.error { _ = try MappingSet.load(directory: dir) }?.code, .invalidMapping)
    }

    /// Every field of Apple's verifyReceipt response that the gateway knows of is declared (mapped
    /// or ignored) in the shipped legacy file, so none ends up silently in `unmappedFields`.
    func testLegacyFileDeclaresEveryDocumentedField() throws {
        let file = try XCTUnwrap(S.shipped().version(source: "verifyReceipt", "v1"))
        let dates = { (names: [String]) in names.flatMap { [$0, $0 + "_ms", $0 + "_pst"] } }
        let expected: [String: [String]] = [
            "response": ["status", "environment", "is-retryable", "receipt", "latest_receipt_info",
                         "latest_receipt", "pending_renewal_info"],
            "receipt": ["bundle_id", "app_item_id", "adam_id", "receipt_type", "original_application_version",
                        "application_version", "download_id", "version_external_identifier", "in_app"]
                + dates(["receipt_creation_date", "original_purchase_date", "request_date", "expiration_date", "preorder_date"]),
            "in_app": ["transaction_id", "original_transaction_id", "web_order_line_item_id", "product_id", "quantity",
                       "cancellation_reason", "is_trial_period", "is_in_intro_offer_period", "promotional_offer_id",
                       "offer_code_ref_name", "is_upgraded", "in_app_ownership_type", "subscription_group_identifier",
                       "app_account_token"]
                + dates(["purchase_date", "original_purchase_date", "expires_date", "cancellation_date"]),
            "pending_renewal_info": ["auto_renew_product_id", "auto_renew_status", "expiration_intent",
                                     "is_in_billing_retry_period", "price_consent_status", "price_increase_status",
                                     "product_id", "original_transaction_id", "offer_code_ref_name",
                                     "promotional_offer_id", "offer_type"]
                + dates(["grace_period_expires_date"]),
        ]
        for (kind, fields) in expected {
            let declared = file.declaredFields(kind: kind)
            XCTAssertEqual(Set(fields).subtracting(declared), [], "undeclared in \(kind)")
        }
        // The text dates are declared as ignored, not mapped.
        XCTAssertNotNil(file.ignoredFields(kind: "in_app")["purchase_date_pst"])
        XCTAssertNotNil(file.ignoredFields(kind: "in_app")["expires_date"])
    }

    func testServerFileDeclaresEveryPayloadField() throws {
        let file = try XCTUnwrap(S.shipped().version(source: "serverAPI", "v1"))
        let expected: [String: [String]] = [
            "transaction": ["transactionId", "originalTransactionId", "webOrderLineItemId", "bundleId", "productId",
                            "subscriptionGroupIdentifier", "purchaseDate", "originalPurchaseDate", "expiresDate",
                            "quantity", "type", "appAccountToken", "inAppOwnershipType", "signedDate",
                            "revocationReason", "revocationDate", "isUpgraded", "offerType", "offerIdentifier",
                            "environment", "storefront", "storefrontId", "transactionReason", "currency", "price",
                            "offerDiscountType", "appTransactionId", "offerPeriod"],
            "renewalInfo": ["expirationIntent", "originalTransactionId", "autoRenewProductId", "productId",
                            "autoRenewStatus", "isInBillingRetryPeriod", "priceIncreaseStatus", "gracePeriodExpiresDate",
                            "offerType", "offerIdentifier", "signedDate", "environment", "recentSubscriptionStartDate",
                            "renewalDate", "renewalPrice", "currency", "offerDiscountType", "eligibleWinBackOfferIds",
                            "appAccountToken", "appTransactionId", "offerPeriod"],
            "appTransaction": ["receiptType", "appAppleId", "bundleId", "applicationVersion", "versionExternalIdentifier",
                               "receiptCreationDate", "originalPurchaseDate", "originalApplicationVersion",
                               "deviceVerification", "deviceVerificationNonce", "preorderDate", "appTransactionId",
                               "originalPlatform"],
        ]
        for (kind, fields) in expected {
            XCTAssertEqual(Set(fields).subtracting(file.declaredFields(kind: kind)), [], "undeclared in \(kind)")
        }
    }
}
