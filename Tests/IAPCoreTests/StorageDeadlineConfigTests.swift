import Foundation
import IAPConfig
import IAPCore
import XCTest

/// `timeouts.storageSeconds`: how long a request waits for one storage call.
final class StorageDeadlineConfigTests: XCTestCase {
    private func gateway(_ timeouts: String?) throws(VerificationError) -> GatewayConfig {
        try ConfigLoader.decodeGateway(Data("<gateway>\(timeouts.map { "<timeouts>\($0)</timeouts>" } ?? "")</gateway>".utf8),
                                       format: .xml, displayName: "gateway.xml", baseDirectory: URL(fileURLWithPath: "/tmp"))
    }

    func testTheStorageDeadlineIsFiveSecondsUnlessSetAndStaysWithinOneToSixtySeconds() throws {
        XCTAssertEqual(try gateway(nil).timeouts.storageSeconds, 5)
        XCTAssertEqual(try gateway(#"<storageSeconds type="integer">2</storageSeconds>"#).timeouts.storageSeconds, 2)
        for refused in ["0", "61"] {
            do {
                _ = try gateway(#"<storageSeconds type="integer">\#(refused)</storageSeconds>"#)
                XCTFail("storageSeconds \(refused) was accepted")
            } catch {
                XCTAssertEqual(error.code, .invalidConfiguration)
                XCTAssertTrue(error.message.contains("timeouts.storageSeconds"), error.message)
            }
        }
    }
}
