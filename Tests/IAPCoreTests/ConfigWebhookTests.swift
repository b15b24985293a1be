import Foundation
import XCTest
@testable import IAPCore

final class ConfigWebhookTests: XCTestCase {
    func xml(_ webhook: String) -> String {
        ConfigTestSupport.appXML(body: ConfigTestSupport.validXMLBody + "\n" + webhook)
    }

    func testWebhookWithURLAndSecretReferenceIsLoaded() throws {
        let policy = try ConfigTestSupport.decode(xml("<webhook><url>https://backend.example/iap</url><secret><env>HOOK_KEY</env></secret></webhook>"), .xml)
        XCTAssertEqual(policy.webhook?.url, "https://backend.example/iap")
        XCTAssertEqual(policy.webhook?.secret.description, "env:HOOK_KEY")
        XCTAssertNil(try ConfigTestSupport.decode(ConfigTestSupport.appXML(), .xml).webhook)
    }

    func testPlainHTTPWebhookIsRefusedExceptToLoopback() throws {
        XCTAssertNoThrow(try ConfigTestSupport.decode(xml("<webhook><url>http://127.0.0.1:9000/hook</url><secret><env>K</env></secret></webhook>"), .xml))
        let refusal = ConfigTestSupport.refusal { () throws(VerificationError) in
            _ = try ConfigTestSupport.decode(xml("<webhook><url>http://backend.example/hook</url><secret><env>K</env></secret></webhook>"), .xml)
        }
        XCTAssertEqual(refusal?.code, .invalidConfiguration)
        XCTAssertTrue(refusal?.message.contains("webhook.url") == true, refusal?.message ?? "")
    }

    func testWebhookWithoutSecretIsRefused() {
        let refusal = ConfigTestSupport.refusal { () throws(VerificationError) in
            _ = try ConfigTestSupport.decode(xml("<webhook><url>https://backend.example/iap</url></webhook>"), .xml)
        }
        XCTAssertEqual(refusal?.code, .invalidConfiguration)
    }
}
