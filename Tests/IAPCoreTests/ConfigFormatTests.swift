import Foundation
import XCTest
@testable import IAPConfig
@testable import IAPCore

/// One schema, two formats, one decoder: the same settings give the same policy in either format.
final class ConfigFormatTests: XCTestCase {
    typealias S = ConfigTestSupport

    func testExamplePlistAndXMLTwinsGiveTheSameAppPolicy() throws {
        let plist = try ConfigLoader.loadAppPolicy(file: S.configDirectory.appendingPathComponent("apps/com.example.demo.plist"))
        let xml = try ConfigLoader.loadAppPolicy(file: S.configDirectory.appendingPathComponent("examples/com.example.demo.xml"))
        XCTAssertEqual(plist, xml)
        XCTAssertEqual(plist.bundleId, "com.example.demo")
        XCTAssertEqual(plist.appAppleId, 1234567890)
        XCTAssertEqual(plist.allowedEnvironments, [.production, .sandbox])
        XCTAssertEqual(plist.productCatalog.count, 3)
        XCTAssertEqual(plist.productCatalog["com.example.demo.pro.monthly"],
                       AppPolicy.Product(productId: "com.example.demo.pro.monthly", type: .autoRenewable,
                                         priceMilliunits: 4990, currency: "USD"))
        XCTAssertEqual(plist.routing.receipt, .shadow)
        XCTAssertEqual(plist.sharedSecret, SecretReference(.environmentVariable("DEMO_SHARED_SECRET"),
                                                           previous: .environmentVariable("DEMO_SHARED_SECRET_PREVIOUS")))
        // Relative paths resolve against the file's own folder, so both twins land on Config/trust.
        XCTAssertEqual(plist.trustRoots.jws, [S.configDirectory.appendingPathComponent("trust/AppleRootCA-G3.cer").standardizedFileURL])
    }

    func testInlineTwinsGiveTheSameTreeAndPolicy() throws {
        let xmlTree = try ConfigFormat.readTree(Data(S.appXML().utf8), format: .xml, displayName: "a.xml", rootElement: "app")
        let plistTree = try ConfigFormat.readTree(Data(S.appPlist().utf8), format: .plist, displayName: "a.plist", rootElement: "app")
        XCTAssertEqual(xmlTree, plistTree)
        XCTAssertEqual(try S.decode(S.appXML(), .xml), try S.decode(S.appPlist(), .plist))
    }

    func testXMLTypesAreWrittenNotGuessed() throws {
        let tree = try ConfigFormat.readTree(Data("<app><a>123</a><b type=\"integer\">123</b><c type=\"bool\">true</c><d type=\"array\"/></app>".utf8),
                                             format: .xml, displayName: "t.xml", rootElement: "app")
        XCTAssertEqual(tree, ConfigNode(.dictionary(["a": ConfigNode(.string("123")), "b": ConfigNode(.integer(123)),
                                                     "c": ConfigNode(.bool(true)), "d": ConfigNode(.array([]))])))
    }

    func testRealVectorFixturesLoadWithTheirTrustRootsPresent() throws {
        let config = try ConfigLoader.loadAll(configDirectory: S.fixtureConfig)
        XCTAssertEqual(Set(config.apps.keys), ["com.goodheartapp", "com.nineton.taller"])
        let taller = try XCTUnwrap(config.apps["com.nineton.taller"])
        XCTAssertEqual(taller.appAppleId, 6450284872)
        XCTAssertTrue(taller.identity(for: .apple).environments.contains(.production))
        XCTAssertFalse(taller.identity(for: .apple).environments.contains(.sandbox))
        let goodheart = try XCTUnwrap(config.apps["com.goodheartapp"])
        XCTAssertEqual(goodheart.allowedEnvironments, [.sandbox])
        XCTAssertEqual(goodheart.productCatalog["gh_super_good_ticket_1"]?.priceMilliunits, 230000)
        XCTAssertEqual(goodheart.productCatalog["gh_super_good_ticket_1"]?.currency, "JPY")
        for policy in config.apps.values {
            XCTAssertEqual(policy.diagnostics(environment: [:]).filter { $0.severity == .error }, [], policy.bundleId)
        }
        XCTAssertNil(config.gatewayFile)
        XCTAssertEqual(config.gateway.storage, .sqlite(path: "var/iapgw.sqlite"))
    }

    func testMissingTrustRootIsADiagnosticErrorAndUnsetSecretOnlyAWarning() throws {
        let policy = try ConfigLoader.loadAppPolicy(file: S.configDirectory.appendingPathComponent("apps/com.example.demo.plist"))
        let diagnostics = policy.diagnostics(environment: ["DEMO_SHARED_SECRET": "x"])
        XCTAssertTrue(diagnostics.contains { $0.severity == .error && $0.message.contains("trustRoots.jws") })
        XCTAssertTrue(diagnostics.contains { $0.severity == .warning && $0.message == "apiKey: env:DEMO_API_KEY is not set" })
        XCTAssertFalse(diagnostics.contains { $0.message.contains("env:DEMO_SHARED_SECRET is not set") })
    }

    /// Issue 13 item 4: Apple's current Server API hosts are the defaults; a gateway file naming the
    /// older ones still loads unchanged.
    func testServerAPIHostsDefaultToApplesCurrentOnesAndTheOldOnesStillLoad() throws {
        let defaults = GatewayConfig.Upstream()
        XCTAssertEqual(defaults.serverAPI.production, "https://api.storekit.apple.com")
        XCTAssertEqual(defaults.serverAPI.sandbox, "https://api.storekit-sandbox.apple.com")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("iapgw-hosts-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("gateway.xml")
        try Data("""
            <?xml version="1.0" encoding="UTF-8"?>
            <gateway>
                <upstream>
                    <serverAPIProduction>https://api.storekit.itunes.apple.com</serverAPIProduction>
                    <serverAPISandbox>https://api.storekit-sandbox.itunes.apple.com</serverAPISandbox>
                </upstream>
            </gateway>
            """.utf8).write(to: file)
        let old = try ConfigLoader.loadGateway(file: file)
        XCTAssertEqual(old.upstream.serverAPI.production, "https://api.storekit.itunes.apple.com")
        XCTAssertEqual(old.upstream.serverAPI.sandbox, "https://api.storekit-sandbox.itunes.apple.com")
        XCTAssertEqual(old.upstream.verifyReceipt, defaults.verifyReceipt)
    }

    func testGatewayFileDefaultsAndOverrides() throws {
        let xml = try ConfigLoader.loadGateway(file: S.configDirectory.appendingPathComponent("gateway.xml"))
        XCTAssertEqual(xml.storage, .sqlite(path: "var/iapgw.sqlite"))
        XCTAssertEqual(xml.upstream.verifyReceipt.production, "https://buy.itunes.apple.com/verifyReceipt")
        XCTAssertEqual(xml.upstream.serverAPI.sandbox, "https://api.storekit-sandbox.apple.com")
        XCTAssertEqual(xml.listenPort, 8080)
        XCTAssertEqual(xml.timeouts, GatewayConfig.Timeouts(), "Config/gateway.xml shows the defaults")
        XCTAssertEqual(xml.webhooks, GatewayConfig.Webhooks())
        XCTAssertEqual(xml.timeouts.budgetSeconds, 20)
        XCTAssertEqual(xml.webhooks.leaseSeconds, 10)
        XCTAssertEqual(xml.webhooks.concurrency, 8)
        XCTAssertNil(xml.instanceId)
        XCTAssertEqual(xml.background, GatewayConfig.Background())
        XCTAssertNil(xml.tls)
        XCTAssertNil(xml.receiptSealKey)
        let plist = try ConfigLoader.loadGateway(file: S.configDirectory.appendingPathComponent("examples/gateway.plist"))
        XCTAssertEqual(plist.listenPort, 8443)
        XCTAssertEqual(plist.storage, .postgres(url: "postgresql://iapgw@localhost/iapgw"))
        XCTAssertEqual(plist.appsDirectory.standardizedFileURL, xml.appsDirectory.standardizedFileURL)
        XCTAssertEqual(plist.limits, GatewayConfig.Limits())
    }

    /// Issue 10 items 4 and 7: the request's upstream budget, the webhook lease and the instance's name.
    func testGatewayReadsTheUpstreamBudgetTheWebhookLeaseAndTheInstanceIdWithinTheirRanges() throws {
        func gateway(_ body: String) throws(VerificationError) -> GatewayConfig {
            try ConfigLoader.decodeGateway(Data("<gateway>\(body)</gateway>".utf8), format: .xml, displayName: "gateway.xml",
                                           baseDirectory: URL(fileURLWithPath: "/tmp"))
        }
        let set = try gateway("""
            <timeouts><budgetSeconds type="integer">7</budgetSeconds></timeouts>\
            <webhooks><leaseSeconds type="integer">30</leaseSeconds><concurrency type="integer">32</concurrency></webhooks>\
            <instanceId>gw-eu-1</instanceId>
            """)
        XCTAssertEqual(set.timeouts.budgetSeconds, 7)
        XCTAssertEqual(set.webhooks.leaseSeconds, 30)
        XCTAssertEqual(set.webhooks.concurrency, 32)
        XCTAssertEqual(try gateway("").webhooks.concurrency, 8)
        XCTAssertEqual(set.instanceId, "gw-eu-1")
        for (body, path) in [("<timeouts><budgetSeconds type=\"integer\">0</budgetSeconds></timeouts>", "timeouts.budgetSeconds"),
                             ("<webhooks><leaseSeconds type=\"integer\">2</leaseSeconds></webhooks>", "webhooks.leaseSeconds"),
                             ("<webhooks><leaseMillis type=\"integer\">2</leaseMillis></webhooks>", "webhooks"),
                             ("<webhooks><concurrency type=\"integer\">0</concurrency></webhooks>", "webhooks.concurrency"),
                             ("<instanceId>gw eu</instanceId>", "instanceId")] {
            let error = S.refusal { () throws(VerificationError) in _ = try gateway(body) }
            XCTAssertEqual(error?.code, .invalidConfiguration, body)
            XCTAssertTrue(error?.message.contains(path) ?? false, "\(body): \(error?.message ?? "accepted")")
        }
    }

    func testGatewayRefusesPlainHTTPUpstreamExceptLocalhost() throws {
        func gateway(_ url: String) throws(VerificationError) -> GatewayConfig {
            try ConfigLoader.decodeGateway(Data("<gateway><upstream><serverAPIProduction>\(url)</serverAPIProduction></upstream></gateway>".utf8),
                                           format: .xml, displayName: "gateway.xml", baseDirectory: URL(fileURLWithPath: "/tmp"))
        }
        XCTAssertEqual(try gateway("http://127.0.0.1:9000").upstream.serverAPI.production, "http://127.0.0.1:9000")
        let error = S.refusal { () throws(VerificationError) in _ = try gateway("http://evil.example.com") }
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertEqual(error?.message, "gateway.xml:1: upstream.serverAPIProduction: must be https (plain http only to localhost)")
    }

    func testGatewayRefusesAPostgreSQLPasswordInTheStorageURLWithoutEchoingIt() throws {
        func gateway(_ url: String) throws(VerificationError) -> GatewayConfig {
            try ConfigLoader.decodeGateway(Data("<gateway><storageURL>\(url)</storageURL></gateway>".utf8),
                                           format: .xml, displayName: "gateway.xml", baseDirectory: URL(fileURLWithPath: "/tmp"))
        }
        XCTAssertEqual(try gateway("postgres://iapgw@db.internal:5432/iapgw?sslmode=require").storage,
                       .postgres(url: "postgres://iapgw@db.internal:5432/iapgw?sslmode=require"))
        XCTAssertEqual(try gateway("postgresql://127.0.0.1:5433/iapgw").storage, .postgres(url: "postgresql://127.0.0.1:5433/iapgw"))
        XCTAssertEqual(try gateway("sqlite:/var/lib/iapgw/ledger.sqlite").storage, .sqlite(path: "/var/lib/iapgw/ledger.sqlite"))
        // libpq percent-decodes query keywords too: `passw%6Frd` is `password` to it.
        for url in ["postgres://iapgw:hunter2pw@db/iapgw", "postgresql://db/iapgw?password=hunter2pw",
                    "postgresql://db/iapgw?passw%6Frd=hunter2pw", "postgres://db/iapgw?%70assword=hunter2pw"] {
            let error = S.refusal { () throws(VerificationError) in _ = try gateway(url) }
            XCTAssertEqual(error?.code, .invalidConfiguration, url)
            XCTAssertTrue(error?.message.contains("PGPASSWORD") == true, error?.message ?? "")
            XCTAssertFalse(error?.message.contains("hunter2pw") ?? true, "the password is not echoed")
        }
    }

    func testLoadAllRefusesGatewayInBothFormats() throws {
        let dir = try S.makeTempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data("<gateway/>".utf8).write(to: dir.appendingPathComponent("gateway.xml"))
        try Data("<gateway/>".utf8).write(to: dir.appendingPathComponent("gateway.plist"))
        let error = S.refusal { () throws(VerificationError) in _ = try ConfigLoader.loadAll(configDirectory: dir) }
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertTrue(error?.message.contains("both gateway.plist and gateway.xml") == true)
    }
}
