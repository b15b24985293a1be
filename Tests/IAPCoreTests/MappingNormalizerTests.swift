import IAPMapping
import XCTest
import IAPCore

/// The shipped files applied to inputs that are wrong in the ways Apple's two generations differ.
final class MappingNormalizerTests: XCTestCase {
    typealias S = MappingTestSupport

    private func legacy() throws -> LegacyReceiptNormalizer {
        try LegacyReceiptNormalizer(XCTUnwrap(S.shipped().latest(source: "verifyReceipt")))
    }

    private func server() throws -> ServerAPINormalizer {
        try ServerAPINormalizer(XCTUnwrap(S.shipped().latest(source: "serverAPI")))
    }

    func testServerAPIRefusesADateSentAsAString() throws {
        let normalizer = try server()
        let error = S.error {
            _ = try normalizer.normalize(transaction: S.json(#"{"transactionId": "1", "productId": "p", "purchaseDate": "1700000000000"}"#))
        }
        XCTAssertEqual(error?.code, .invalidFieldType)
        XCTAssertTrue(error?.message.contains("transaction.purchaseDate") == true, error?.message ?? "")
    }

    func testServerAPIKeepsUnknownEnumValues() throws {
        let t = try server().normalize(transaction: S.json("""
            {"transactionId": "1", "productId": "p", "type": "Future Type", "offerType": 9, "environment": "Staging"}
            """))
        XCTAssertEqual(t.type?.rawValue, "Future Type")
        XCTAssertEqual(t.offerType?.rawValue, 9)
        XCTAssertEqual(t.environment?.rawValue, "Staging")
    }

    func testServerAPIAppTransactionReceiptTypeAlsoNamesTheEnvironment() throws {
        let app = try server().normalize(appTransaction: S.json(#"{"bundleId": "b", "receiptType": "Production"}"#))
        XCTAssertEqual(app.receiptType, .production)
        XCTAssertEqual(app.environment, .production)
        XCTAssertEqual(app.source, "serverAPI")
    }

    func testLegacyQuantityThatIsNotANumberIsRefusedWithItsPath() throws {
        let normalizer = try legacy()
        let error = S.error {
            _ = try normalizer.normalize(verifyReceiptResponse: S.json("""
                {"status": 0, "latest_receipt_info": [{"transaction_id": "1", "product_id": "p", "quantity": "abc"}]}
                """))
        }
        XCTAssertEqual(error?.code, .invalidFieldType)
        XCTAssertTrue(error?.message.contains("latest_receipt_info[0].quantity") == true, error?.message ?? "")
    }

    func testLegacyBillingRetryFlagOutsideTheFourSpellingsIsRefused() throws {
        let normalizer = try legacy()
        let error = S.error {
            _ = try normalizer.normalize(verifyReceiptResponse: S.json("""
                {"status": 0, "pending_renewal_info": [{"original_transaction_id": "1", "is_in_billing_retry_period": "yes"}]}
                """))
        }
        XCTAssertEqual(error?.code, .invalidFieldType)
    }

    func testLegacyRefusalStatusNormalisesWithoutRecords() throws {
        let result = try legacy().normalize(verifyReceiptResponse: S.json(#"{"status": 21007, "is-retryable": false}"#))
        XCTAssertEqual(result.status, 21007)
        XCTAssertEqual(result.isRetryable, false)
        XCTAssertNil(result.appTransaction)
        XCTAssertEqual(result.transactions, [])
        XCTAssertEqual(result.mappingVersion, "verifyReceipt/v1")
    }

    func testLegacyMissingStatusIsRefused() throws {
        let normalizer = try legacy()
        XCTAssertEqual(S.error { _ = try normalizer.normalize(verifyReceiptResponse: S.json(#"{"environment": "Sandbox"}"#)) }?.code,
                       .missingField)
        XCTAssertEqual(S.error { _ = try normalizer.normalize(verifyReceiptResponse: S.json(#"{"status": 0, "receipt": "x"}"#)) }?.code,
                       .invalidFieldType)
    }

    func testLegacyUnknownFieldsAreReportedByKind() throws {
        let result = try legacy().normalize(verifyReceiptResponse: S.json("""
            {"status": 0, "environment": "Production", "shiny": 1,
             "receipt": {"bundle_id": "b", "receipt_type": "ProductionVPP", "in_app": [
               {"transaction_id": "1", "product_id": "p", "new_field": "x", "is_in_intro_offer_period": "true"}]}}
            """))
        XCTAssertEqual(result.unmappedFields, ["in_app.new_field", "response.shiny"])
        XCTAssertEqual(result.appTransaction?.receiptType?.rawValue, "ProductionVPP", "unknown receipt types are kept raw")
        let t = try XCTUnwrap(result.transactions.first)
        XCTAssertEqual(t.offerType, .introductory)
        XCTAssertNil(t.offerDiscountType, "legacy does not say which introductory discount")
        XCTAssertEqual(t.bundleId, "b", "inherited from the receipt")
        XCTAssertEqual(t.environment, .production, "inherited from the response")
    }

    func testLegacyOfferCodeWinsOverTheTrialFlag() throws {
        let result = try legacy().normalize(verifyReceiptResponse: S.json("""
            {"status": 0, "latest_receipt_info": [
              {"transaction_id": "1", "product_id": "p", "is_trial_period": "true", "offer_code_ref_name": "SPRING"}]}
            """))
        XCTAssertEqual(result.transactions.first?.offerType, .offerCode)
        XCTAssertEqual(result.transactions.first?.offerIdentifier, "SPRING")
    }
}

extension MappingNormalizerTests {
    func testLegacySingleObjectLatestReceiptInfoCountsAsOneEntry() throws {
        let result = try legacy().normalize(verifyReceiptResponse: S.json("""
            {"status": 0, "latest_receipt_info": {"transaction_id": "9", "product_id": "p", "quantity": "2"}}
            """))
        XCTAssertEqual(result.transactions.map(\.transactionId), ["9"])
        XCTAssertEqual(result.transactions.first?.quantity, 2)
    }

    func testLegacyNestedListOfNonObjectsIsRefused() throws {
        let normalizer = try legacy()
        let error = S.error {
            _ = try normalizer.normalize(verifyReceiptResponse: S.json(#"{"status": 0, "latest_receipt_info": ["x"]}"#))
        }
        XCTAssertEqual(error?.code, .invalidFieldType)
    }
}

final class LegacyChainGroupTests: XCTestCase {
    /// Older renewals come from `in_app` without a subscription group; the chain's group is theirs too.
    func testAnOlderRenewalInAppTakesItsChainsSubscriptionGroup() throws {
        let mappings = try MappingSet.load(directory: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Mappings"))
        let normalizer = try LegacyReceiptNormalizer(mappings.latest(source: "verifyReceipt")!)
        let response = try StrictJSON().parse(#"""
            {"status":0,"environment":"Production",
             "receipt":{"bundle_id":"b","in_app":[{"transaction_id":"1","original_transaction_id":"1","product_id":"p","quantity":"1","purchase_date_ms":"1000","expires_date_ms":"2000"}]},
             "latest_receipt_info":[{"transaction_id":"2","original_transaction_id":"1","product_id":"p","quantity":"1","purchase_date_ms":"2000","expires_date_ms":"3000","subscription_group_identifier":"g1"}]}
            """#)
        let result = try normalizer.normalize(verifyReceiptResponse: response)
        XCTAssertEqual(result.transactions.map(\.subscriptionGroupIdentifier), ["g1", "g1"])
    }
}
