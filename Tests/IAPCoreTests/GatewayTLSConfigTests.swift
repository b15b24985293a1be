import Foundation
@testable import IAPConfig
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

/// Gateway-wide settings that were environment variables only (issue 15, item 5): in the gateway
/// file, with the environment overriding each.
final class GatewayBackgroundConfigTests: XCTestCase {
    private func gateway(_ body: String) throws(VerificationError) -> GatewayConfig {
        try ConfigLoader.decodeGateway(Data("<gateway>\(body)</gateway>".utf8), format: .xml, displayName: "gateway.xml",
                                       baseDirectory: URL(fileURLWithPath: "/etc/iapgw"))
    }

    func testTheFileSetsThemAndTheEnvironmentOverridesEach() throws {
        let config = try gateway("""
            <background><reconcileIntervalSeconds type="integer">0</reconcileIntervalSeconds>
            <notificationRetentionDays type="integer">90</notificationRetentionDays></background>
            <receiptSealKey><file>secrets/seal</file></receiptSealKey>
            """)
        XCTAssertEqual(config.background.reconcileIntervalSeconds, 0)
        XCTAssertEqual(config.background.notificationRetentionDays, 90)
        XCTAssertEqual(config.background.entitlementSweepSeconds, 30)
        XCTAssertEqual(config.receiptSealKey, SecretReference(.file(URL(fileURLWithPath: "/etc/iapgw/secrets/seal"))))

        let effective = try config.background.overridden(by: ["IAPGW_RECONCILE_INTERVAL_SECONDS": "600",
                                                              "IAPGW_ENTITLEMENT_SWEEP_SECONDS": "5"])
        XCTAssertEqual(effective.reconcileIntervalSeconds, 600)
        XCTAssertEqual(effective.notificationRetentionDays, 90, "not set in the environment: the file's")
        XCTAssertEqual(effective.entitlementSweepSeconds, 5)
        XCTAssertEqual(try config.background.overridden(by: [:]), config.background)
    }

    func testOutOfRangeValuesAreRefusedInTheFileAndInTheEnvironment() {
        for body in [#"<background><entitlementSweepSeconds type="integer">61</entitlementSweepSeconds></background>"#,
                     #"<background><notificationRetentionDays type="integer">0</notificationRetentionDays></background>"#,
                     #"<background><reconcileIntervalSeconds>900</reconcileIntervalSeconds></background>"#,
                     #"<background><sweepSeconds type="integer">5</sweepSeconds></background>"#] {
            XCTAssertThrowsError(try gateway(body), body)
        }
        for (name, value) in [("IAPGW_RECONCILE_INTERVAL_SECONDS", "-1"), ("IAPGW_NOTIFICATION_RETENTION_DAYS", "ten"),
                              ("IAPGW_ENTITLEMENT_SWEEP_SECONDS", "0")] {
            XCTAssertThrowsError(try GatewayConfig.Background().overridden(by: [name: value])) { error in
                XCTAssertTrue((error as? VerificationError)?.message.contains(name) == true, "\(error)")
            }
        }
    }
}
