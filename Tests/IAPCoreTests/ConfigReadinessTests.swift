import XCTest
@testable import IAPConfig
@testable import IAPCore

/// `readiness`: the cutover verdict's thresholds per app, with documented defaults.
final class ConfigReadinessTests: XCTestCase {
    private func decode(_ readiness: String) throws(VerificationError) -> AppPolicy {
        try ConfigTestSupport.decode(ConfigTestSupport.appXML(body: ConfigTestSupport.validXMLBody + "\n" + readiness), .xml)
    }

    func testAbsentReadinessIsTheDocumentedDefaults() throws {
        let policy = try ConfigTestSupport.decode(ConfigTestSupport.appXML(), .xml)
        XCTAssertEqual(policy.readiness.agreementThreshold, 0.995)
        XCTAssertEqual(policy.readiness.minimumPurchaseChains, 100)
        XCTAssertEqual(policy.readiness.minimumAccounts, 20)
        XCTAssertEqual(policy.readiness.minimumObservationDays, 7)
        XCTAssertEqual(policy.readiness.explainedFailures, [:])
    }

    func testEveryThresholdAndExplainedFailureIsRead() throws {
        let policy = try decode("""
            <readiness><agreementThreshold>0.99</agreementThreshold>
            <minimumPurchaseChains type="integer">500</minimumPurchaseChains><minimumAccounts type="integer">50</minimumAccounts>
            <minimumObservationDays type="integer">14</minimumObservationDays>
            <explainedFailures type="array"><item><code>RATE_LIMITED</code><reason>backfill ran at Apple's limit</reason></item></explainedFailures>
            </readiness>
            """)
        XCTAssertEqual(policy.readiness.agreementThreshold, 0.99)
        XCTAssertEqual(policy.readiness.minimumPurchaseChains, 500)
        XCTAssertEqual(policy.readiness.minimumAccounts, 50)
        XCTAssertEqual(policy.readiness.minimumObservationDays, 14)
        XCTAssertEqual(policy.readiness.explainedFailures, ["RATE_LIMITED": "backfill ran at Apple's limit"])
    }

    func testOutOfRangeOrUnknownReadinessSettingsAreRefused() {
        for bad in ["<readiness><agreementThreshold>1.5</agreementThreshold></readiness>",
                    "<readiness><agreementThreshold>0</agreementThreshold></readiness>",
                    "<readiness><minimumPurchaseChains type=\"integer\">0</minimumPurchaseChains></readiness>",
                    "<readiness><minimumComparisons type=\"integer\">100</minimumComparisons></readiness>",
                    "<readiness><explainedFailures type=\"array\"><item><code>X</code></item></explainedFailures></readiness>"] {
            let refusal = ConfigTestSupport.refusal { () throws(VerificationError) in _ = try decode(bad) }
            XCTAssertEqual(refusal?.code, .invalidConfiguration, bad)
            XCTAssertTrue(refusal?.message.contains("readiness") == true, refusal?.message ?? "")
        }
    }
}
