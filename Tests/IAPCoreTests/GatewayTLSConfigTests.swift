import Foundation
import IAPCore
import XCTest

/// The gateway file's `tls` section (issue 15, item 4): absent means plain HTTP.
final class GatewayTLSConfigTests: XCTestCase {
    private func gateway(_ tls: String?) throws(VerificationError) -> GatewayConfig {
        try ConfigLoader.decodeGateway(Data("<gateway>\(tls.map { "<tls>\($0)</tls>" } ?? "")</gateway>".utf8),
                                       format: .xml, displayName: "gateway.xml", baseDirectory: URL(fileURLWithPath: "/etc/iapgw"))
    }

    func testNoSectionIsPlainHTTPAndPathsAreRelativeToTheGatewayFilesFolder() throws {
        XCTAssertNil(try gateway(nil).tls)
        let tls = try XCTUnwrap(try gateway("<certificateFile>tls/server.pem</certificateFile>"
                                            + "<privateKeyFile>/secure/server.key</privateKeyFile>").tls)
        XCTAssertEqual(tls.certificateFile.path, "/etc/iapgw/tls/server.pem")
        XCTAssertEqual(tls.privateKeyFile.path, "/secure/server.key")
        XCTAssertEqual(tls.minimumVersion, .tls12)
        let strict = try gateway("<certificateFile>a.pem</certificateFile><privateKeyFile>a.key</privateKeyFile>"
                                 + "<minimumVersion>1.3</minimumVersion>").tls
        XCTAssertEqual(strict?.minimumVersion, .tls13)
    }

    func testIncompleteUnknownOrTooOldSettingsAreRefused() {
        let refused: [(String, String)] = [
            ("<certificateFile>a.pem</certificateFile>", "tls.privateKeyFile: required key is missing"),
            ("<privateKeyFile>a.key</privateKeyFile>", "tls.certificateFile: required key is missing"),
            ("<certificateFile>a.pem</certificateFile><privateKeyFile>a.key</privateKeyFile><minimumVersion>1.1</minimumVersion>",
             "tls.minimumVersion"),
            ("<certificateFile>a.pem</certificateFile><privateKeyFile>a.key</privateKeyFile><keyPassword>x</keyPassword>",
             "tls.keyPassword: unknown key"),
            ("<certificateFile></certificateFile><privateKeyFile>a.key</privateKeyFile>", "tls.certificateFile"),
        ]
        for (section, says) in refused {
            do {
                _ = try gateway(section)
                XCTFail("accepted: \(section)")
            } catch {
                XCTAssertEqual(error.code, .invalidConfiguration)
                XCTAssertTrue(error.message.contains(says), "\(says): \(error.message)")
            }
        }
    }
}
