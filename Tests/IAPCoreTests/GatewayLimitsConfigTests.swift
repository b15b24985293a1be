import Foundation
@testable import IAPConfig
@testable import IAPCore
import XCTest

/// `gateway.limits`: the connection limits are settings, range-checked like the others.
final class GatewayLimitsConfigTests: XCTestCase {
    private func gateway(_ limits: String) throws(VerificationError) -> GatewayConfig {
        let body = limits.isEmpty ? "" : "<limits>\(limits)</limits>"
        return try ConfigLoader.decodeGateway(Data("<gateway>\(body)</gateway>".utf8),
                                       format: .xml, displayName: "gateway.xml", baseDirectory: URL(fileURLWithPath: "/tmp"))
    }

    func testConnectionLimitsDefaultAndAreRead() throws {
        let defaults = try gateway("")
        XCTAssertEqual(defaults.limits.maxConnections, 1024)
        XCTAssertEqual(defaults.limits.maxConnectionsPerClient, 256)
        let set = try gateway(#"<maxConnections type="integer">64</maxConnections>"#
            + #"<maxConnectionsPerClient type="integer">8</maxConnectionsPerClient>"#)
        XCTAssertEqual(set.limits.maxConnections, 64)
        XCTAssertEqual(set.limits.maxConnectionsPerClient, 8)
        XCTAssertEqual(try gateway(#"<maxConnectionsPerClient type="integer">0</maxConnectionsPerClient>"#)
            .limits.maxConnectionsPerClient, 0, "0: no per-address limit, behind a proxy")
    }

    func testConnectionLimitsOutOfRangeAreRefused() {
        for limits in [#"<maxConnections type="integer">0</maxConnections>"#,
                       #"<maxConnections type="integer">70000</maxConnections>"#,
                       #"<maxConnectionsPerClient type="integer">-1</maxConnectionsPerClient>"#,
                       // more per client than in total
                       #"<maxConnections type="integer">64</maxConnections><maxConnectionsPerClient type="integer">65</maxConnectionsPerClient>"#,
                       #"<maxConnections>64</maxConnections>"#] {
            let error = ConfigTestSupport.refusal { () throws(VerificationError) in _ = try gateway(limits) }
            XCTAssertEqual(error?.code, .invalidConfiguration, limits)
            XCTAssertTrue(error?.message.contains("limits.maxConnections") == true, error?.message ?? "")
        }
    }
}
