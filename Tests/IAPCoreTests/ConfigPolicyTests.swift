import Foundation
import XCTest
@testable import IAPConfig
@testable import IAPCore

/// What the policy decoder refuses, and where it says the problem is.
final class ConfigPolicyTests: XCTestCase {
    typealias S = ConfigTestSupport

    private func xmlRefusal(_ body: String, bundleId: String = "com.test.app") -> VerificationError? {
        S.refusal { () throws(VerificationError) in _ = try S.decode(S.appXML(bundleId: bundleId, body: body), .xml) }
    }

    private func replacing(_ old: String, _ new: String) -> String {
        precondition(S.validXMLBody.contains(old), "test edit does not apply: \(old)")
        return S.validXMLBody.replacingOccurrences(of: old, with: new)
    }

    func testValidMinimalPolicyDecodesWithDefaults() throws {
        let policy = try S.decode(S.appXML(), .xml)
        XCTAssertEqual(policy.allowedEnvironments, [.sandbox])
        XCTAssertEqual(policy.sandboxAccounts, [])
        XCTAssertFalse(policy.allowLocalTestEnvironments)
        XCTAssertFalse(policy.identity(for: .apple).environments.contains(.xcode))
        XCTAssertEqual(policy.familySharingPolicy, .deny)
        XCTAssertEqual(policy.apiKey, .secret(SecretReference(.environmentVariable("TEST_API_KEY"))))
    }

    /// Offers are signed with one In-App Purchase key: `offerSigning`, its issuer the Server API's
    /// unless given, else the Server API's own key; the issuer, given or taken, must be a UUID.
    func testTheOfferSigningKeyTakesTheServerAPIsIssuerAndIsTheServerAPIKeyWhenAbsent() throws {
        let serverAPIOnly = try S.decode(S.appXML(), .xml)
        XCTAssertNotNil(serverAPIOnly.serverAPI)
        XCTAssertEqual(serverAPIOnly.offerSigningKey, serverAPIOnly.serverAPI)

        let signing = "<offerSigning><keyId>OFFERKEY7</keyId><privateKey><env>OFFER_P8</env></privateKey></offerSigning>"
        let policy = try S.decode(S.appXML(body: S.validXMLBody + signing), .xml)
        XCTAssertEqual(policy.offerSigningKey, AppPolicy.InAppPurchaseKey(issuerId: "57246542-96fe-1a63-e053-0824d011072a",
                                                                          keyId: "OFFERKEY7",
                                                                          privateKey: SecretReference(.environmentVariable("OFFER_P8"))))

        let badIssuer = "<offerSigning><issuerId>not-a-uuid</issuerId>" + signing.dropFirst("<offerSigning>".count)
        let error = xmlRefusal(S.validXMLBody + badIssuer)
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertTrue(error?.message.contains("offerSigning.issuerId: issuerId is not a UUID") == true, error?.message ?? "accepted")
    }

    func testWrongTypeInPlistIsRefusedWithItsKeyPath() {
        let catalog = """
            <array>
              <dict><key>productId</key><string>a</string><key>type</key><string>Consumable</string></dict>
              <dict><key>productId</key><string>b</string><key>type</key><string>Consumable</string></dict>
              <dict><key>productId</key><string>c</string><key>type</key><string>Consumable</string>
                    <key>priceMilliunits</key><string>990</string><key>currency</key><string>USD</string></dict>
            </array>
            """
        let error = S.refusal { () throws(VerificationError) in _ = try S.decode(S.appPlist(productCatalog: catalog), .plist) }
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertEqual(error?.message, "com.test.app.plist:18: productCatalog[2].priceMilliunits: expected integer, found string")
    }

    func testWrongTypeInXMLIsRefusedWithLineAndKeyPath() {
        let error = xmlRefusal(replacing("<onlineChecks type=\"bool\">false</onlineChecks>", "<onlineChecks>false</onlineChecks>"))
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertEqual(error?.message, "com.test.app.xml:17: onlineChecks: expected boolean, found string")
    }

    func testUnknownKeyIsRefusedSoATypoCannotDropASetting() {
        let error = xmlRefusal(S.validXMLBody + "\n<onlineCheck type=\"bool\">true</onlineCheck>")
        XCTAssertEqual(error?.message, "com.test.app.xml:20: onlineCheck: unknown key")
        let nested = xmlRefusal(replacing("<receipt>legacy</receipt>", "<receipt>legacy</receipt><recept>shadow</recept>"))
        XCTAssertEqual(nested?.message, "com.test.app.xml:13: routing.recept: unknown key")
    }

    func testMissingRequiredKeyIsRefused() {
        let error = xmlRefusal(replacing("<familySharingPolicy>deny</familySharingPolicy>", ""))
        XCTAssertEqual(error?.message, "com.test.app.xml:2: familySharingPolicy: required key is missing")
    }

    func testProductionPolicyCannotAllowLocalTestEnvironments() {
        let body = replacing("<item>Sandbox</item>", "<item>Production</item>")
            + "\n<appAppleId type=\"integer\">42</appAppleId><allowLocalTestEnvironments type=\"bool\">true</allowLocalTestEnvironments>"
        let error = xmlRefusal(body)
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertTrue(error?.message.contains("allowLocalTestEnvironments: a production policy cannot") == true, error?.message ?? "")
    }

    func testSandboxPolicyMayAllowLocalTestEnvironments() throws {
        let body = S.validXMLBody + "\n<allowLocalTestEnvironments type=\"bool\">true</allowLocalTestEnvironments>"
        let policy = try S.decode(S.appXML(body: body), .xml)
        XCTAssertTrue(policy.identity(for: .apple).environments.contains(.xcode))
        XCTAssertTrue(policy.identity(for: .apple).environments.contains(.localTesting))
        XCTAssertFalse(policy.identity(for: .apple).environments.contains(.production))
    }

    func testProductionRequiresAppAppleId() {
        let error = xmlRefusal(replacing("<item>Sandbox</item>", "<item>Production</item>"))
        XCTAssertEqual(error?.message, "com.test.app.xml:2: appAppleId: required when Production is allowed")
    }

    func testLocalTestEnvironmentInAllowedEnvironmentsIsRefused() {
        let error = xmlRefusal(replacing("<item>Sandbox</item>", "<item>Xcode</item>"))
        XCTAssertEqual(error?.message, "com.test.app.xml:3: allowedEnvironments[0]: \"Xcode\" is not one of Production, Sandbox")
    }

    func testBundleIdMustMatchTheFileName() {
        let error = S.refusal { () throws(VerificationError) in
            _ = try S.decode(S.appXML(bundleId: "com.other.app"), .xml, expectedBundleId: "com.test.app")
        }
        XCTAssertEqual(error?.message, "com.test.app.xml:2: bundleId: \"com.other.app\" does not match the file name (com.test.app)")
    }

    func testTransactionIdRoutingMustUseServerAPI() {
        let error = xmlRefusal(replacing("<transactionId>serverAPI</transactionId>", "<transactionId>legacy</transactionId>"))
        XCTAssertTrue(error?.message.hasSuffix("routing.transactionId: legacy routes to verifyReceipt, which does not verify transactionId evidence (verified by: serverAPI)") == true,
                      error?.message ?? "")
    }

    func testDuplicateProductIsRefused() {
        let error = xmlRefusal(replacing("<item><productId>p1</productId><type>Consumable</type></item>",
                                         "<item><productId>p1</productId><type>Consumable</type></item><item><productId>p1</productId><type>Consumable</type></item>"))
        XCTAssertTrue(error?.message.hasSuffix("productCatalog[1].productId: product p1 listed twice") == true, error?.message ?? "")
    }

    func testBothPlistAndXMLForOneAppAreRefused() throws {
        let dir = try S.makeTempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data(S.appXML().utf8).write(to: dir.appendingPathComponent("com.test.app.xml"))
        try Data(S.appPlist().utf8).write(to: dir.appendingPathComponent("com.test.app.plist"))
        let error = S.refusal { () throws(VerificationError) in _ = try ConfigLoader.loadApps(directory: dir) }
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertTrue(error?.message.contains("com.test.app is configured twice (com.test.app.plist, com.test.app.xml)") == true,
                      error?.message ?? "")
    }

    func testFileNameBundleIdMismatchIsRefusedWhenLoadingADirectory() throws {
        let dir = try S.makeTempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data(S.appXML().utf8).write(to: dir.appendingPathComponent("com.renamed.app.xml"))
        let error = S.refusal { () throws(VerificationError) in _ = try ConfigLoader.loadApps(directory: dir) }
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertTrue(error?.message.contains("does not match the file name (com.renamed.app)") == true, error?.message ?? "")
    }

    func testUnexpectedFileInAppsDirectoryIsRefused() throws {
        let dir = try S.makeTempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data(S.appXML().utf8).write(to: dir.appendingPathComponent("com.test.app.plst"))
        let error = S.refusal { () throws(VerificationError) in _ = try ConfigLoader.loadApps(directory: dir) }
        XCTAssertTrue(error?.message.hasSuffix("com.test.app.plst: not a .plist or .xml configuration file") == true, error?.message ?? "")
    }

    func testSecretReferenceResolvesAtUseTimeAndNeverPrintsTheSecret() throws {
        let secret = "s3cr3t-\(UUID().uuidString)"
        let name = "IAPGW_TEST_SECRET_\(UInt32.random(in: 0...UInt32.max))"
        setenv(name, secret, 1)
        defer { unsetenv(name) }
        let body = replacing("<apiKey><env>TEST_API_KEY</env></apiKey>", "<apiKey><env>\(name)</env></apiKey>")
            + "\n<sharedSecret><env>\(name)</env><previous><env>\(name)</env></previous></sharedSecret>"
        let policy = try S.decode(S.appXML(body: body), .xml)
        let reference = try XCTUnwrap(policy.sharedSecret)
        XCTAssertEqual(try reference.resolve(), secret)
        XCTAssertEqual(try reference.resolveData(), Data(secret.utf8))
        XCTAssertEqual(try reference.resolvePrevious(), secret)

        var dumped = ""
        dump(policy, to: &dumped)
        let printed = [String(describing: policy), String(reflecting: policy), dumped, policy.summary,
                       reference.description, reference.debugDescription, policy.apiKey.description,
                       policy.diagnostics().map(\.description).joined()]
        for text in printed { XCTAssertFalse(text.contains(secret), text) }
        XCTAssertEqual(reference.description, "env:\(name) (previous env:\(name))")
    }

    func testUnsetSecretErrorNamesTheVariableNotAValue() {
        let reference = SecretReference(.environmentVariable("IAPGW_SURELY_UNSET_VAR"))
        let error = S.refusal { () throws(VerificationError) in _ = try reference.resolve(environment: [:]) }
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertEqual(error?.message, "secret env:IAPGW_SURELY_UNSET_VAR is not set")
    }

    func testSecretPastedInPlaceOfAVariableNameIsRefusedWithoutEchoingIt() {
        let pasted = "a1b2c3d4e5f6a7b8-c9d0e1f2a3b4c5d6"
        let error = xmlRefusal(replacing("<apiKey><env>TEST_API_KEY</env></apiKey>", "<apiKey><env>\(pasted)</env></apiKey>"))
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertFalse(error?.description.contains(pasted) ?? true)
        XCTAssertTrue(error?.message.hasSuffix("apiKey.env: not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)") == true,
                      error?.message ?? "")
    }

    func testSecretFileIsReadRelativeToTheConfigFile() throws {
        let dir = try S.makeTempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data("-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n".utf8).write(to: dir.appendingPathComponent("key.p8"))
        let body = replacing("<privateKey><env>TEST_P8</env></privateKey>", "<privateKey><file>key.p8</file></privateKey>")
        let policy = try ConfigLoader.decodeAppPolicy(Data(S.appXML(body: body).utf8), format: .xml, displayName: "t.xml",
                                                      baseDirectory: dir)
        let key = try XCTUnwrap(policy.serverAPI?.privateKey)
        XCTAssertTrue(String(decoding: try key.resolveData(), as: UTF8.self).hasPrefix("-----BEGIN PRIVATE KEY-----"))
        XCTAssertFalse(key.description.contains("BEGIN"))
    }

    func testSecretReferenceNeedsExactlyOneSource() {
        let error = xmlRefusal(replacing("<apiKey><env>TEST_API_KEY</env></apiKey>", "<apiKey><env>A</env><file>b</file></apiKey>"))
        XCTAssertTrue(error?.message.hasSuffix("apiKey: give exactly one of env or file") == true, error?.message ?? "")
    }
}
