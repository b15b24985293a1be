import Foundation
import XCTest
@testable import IAPConfig
@testable import IAPCore

/// `retiresAt` on an In-App Purchase key: the date the team's rotation retires it (Apple's keys
/// carry none), exported by `/metrics` for the expiry alert. Optional; a positive integer only.
final class KeyRetirementConfigTests: XCTestCase {
    private func body(retiresAt: String) -> String {
        ConfigTestSupport.validXMLBody.replacingOccurrences(
            of: "<privateKey><env>TEST_P8</env></privateKey>",
            with: "<privateKey><env>TEST_P8</env></privateKey>\(retiresAt)")
    }

    func testAKeyWithoutRetiresAtHasNone() throws {
        let policy = try ConfigTestSupport.decode(ConfigTestSupport.appXML(), .xml)
        XCTAssertNil(policy.serverAPI?.retiresAt)
    }

    func testRetiresAtIsReadInMillisecondsSince1970() throws {
        let policy = try ConfigTestSupport.decode(
            ConfigTestSupport.appXML(body: body(retiresAt: "<retiresAt type=\"integer\">1893456000000</retiresAt>")), .xml)
        XCTAssertEqual(policy.serverAPI?.retiresAt, 1_893_456_000_000)
    }

    func testRetiresAtThatIsNotAPositiveIntegerIsRefusedWithItsLine() {
        for bad in ["<retiresAt>2030-01-01</retiresAt>", "<retiresAt type=\"integer\">0</retiresAt>"] {
            let error = ConfigTestSupport.refusal { () throws(VerificationError) in
                _ = try ConfigTestSupport.decode(ConfigTestSupport.appXML(body: body(retiresAt: bad)), .xml)
            }
            XCTAssertEqual(error?.code, .invalidConfiguration, bad)
            XCTAssertTrue(error?.message.contains("serverAPI.retiresAt") == true, "\(bad): \(error?.message ?? "")")
        }
    }
}
