import XCTest
import IAPCore

/// The cutover spot-check rate in an app's routing config.
final class ComparisonRoutingConfigTests: XCTestCase {
    private func body(receipt: String, rate: String?) -> String {
        let rateXML = rate.map { "<cutoverSampleRate>\($0)</cutoverSampleRate>" } ?? ""
        return ConfigTestSupport.validXMLBody.replacingOccurrences(
            of: "<routing><receipt>legacy</receipt>", with: "<routing>\(rateXML)<receipt>\(receipt)</receipt>")
    }

    func testCutoverSampleRateIsReadAsADecimalAndDefaultsToZero() throws {
        let sampled = try ConfigTestSupport.decode(ConfigTestSupport.appXML(body: body(receipt: "cutover", rate: "0.25")), .xml)
        XCTAssertEqual(sampled.routing.receipt, .cutover)
        XCTAssertEqual(sampled.routing.cutoverSampleRate, 0.25)
        let unsampled = try ConfigTestSupport.decode(ConfigTestSupport.appXML(body: body(receipt: "shadow", rate: nil)), .xml)
        XCTAssertEqual(unsampled.routing.cutoverSampleRate, 0)
    }

    func testCutoverSampleRateOutsideZeroToOneIsRefused() {
        for bad in ["1.5", "-0.1", "nan", "a lot"] {
            let text = ConfigTestSupport.appXML(body: body(receipt: "cutover", rate: bad))
            let error = ConfigTestSupport.refusal { () throws(VerificationError) in
                _ = try ConfigTestSupport.decode(text, .xml)
            }
            XCTAssertEqual(error?.code, .invalidConfiguration, bad)
            XCTAssertTrue(error?.message.contains("cutoverSampleRate") ?? false, error?.message ?? "")
        }
    }
}
