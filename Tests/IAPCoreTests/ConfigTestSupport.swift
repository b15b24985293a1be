import Foundation
import XCTest
@testable import IAPConfig
@testable import IAPCore

/// Paths and builders shared by the configuration tests.
enum ConfigTestSupport {
    static let projectRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let configDirectory = projectRoot.appendingPathComponent("Config")
    static let fixtureConfig = projectRoot.appendingPathComponent("Tests/IAPCoreTests/Fixtures/config")

    /// A small valid app policy in plain XML; tests replace pieces of it to break one thing at a time.
    static let validXMLBody = """
        <allowedEnvironments type="array"><item>Sandbox</item></allowedEnvironments>
        <trustRoots><jws type="array"/><receipts type="array"/></trustRoots>
        <serverAPI>
            <issuerId>57246542-96fe-1a63-e053-0824d011072a</issuerId>
            <keyId>ABC123DEF4</keyId>
            <privateKey><env>TEST_P8</env></privateKey>
        </serverAPI>
        <productCatalog type="array">
            <item><productId>p1</productId><type>Consumable</type></item>
        </productCatalog>
        <routing><receipt>legacy</receipt><transactionId>serverAPI</transactionId><signedTransaction>serverAPI</signedTransaction></routing>
        <noncePolicy><requiredForReceipts type="bool">true</requiredForReceipts><ttlSeconds type="integer">300</ttlSeconds></noncePolicy>
        <familySharingPolicy>deny</familySharingPolicy>
        <gracePeriodPolicy><grantDuringGracePeriod type="bool">true</grantDuringGracePeriod><grantDuringBillingRetry type="bool">false</grantDuringBillingRetry></gracePeriodPolicy>
        <onlineChecks type="bool">false</onlineChecks>
        <localOnlyJWS type="bool">false</localOnlyJWS>
        <apiKey><env>TEST_API_KEY</env></apiKey>
        """

    static func appXML(bundleId: String = "com.test.app", body: String = validXMLBody) -> String {
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<app bundleId=\"\(bundleId)\">\n\(body)\n</app>\n"
    }

    /// A valid plist for the same policy as `appXML()`, with `extraEntries` appended inside the dict.
    static func appPlist(extraEntries: String = "", productCatalog: String? = nil) -> String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0">
        <dict>
            <key>bundleId</key><string>com.test.app</string>
            <key>allowedEnvironments</key><array><string>Sandbox</string></array>
            <key>trustRoots</key><dict><key>jws</key><array/><key>receipts</key><array/></dict>
            <key>serverAPI</key><dict>
                <key>issuerId</key><string>57246542-96fe-1a63-e053-0824d011072a</string>
                <key>keyId</key><string>ABC123DEF4</string>
                <key>privateKey</key><dict><key>env</key><string>TEST_P8</string></dict>
            </dict>
            <key>productCatalog</key>
            \(productCatalog ?? "<array><dict><key>productId</key><string>p1</string><key>type</key><string>Consumable</string></dict></array>")
            <key>routing</key><dict><key>receipt</key><string>legacy</string><key>transactionId</key><string>serverAPI</string><key>signedTransaction</key><string>serverAPI</string></dict>
            <key>noncePolicy</key><dict><key>requiredForReceipts</key><true/><key>ttlSeconds</key><integer>300</integer></dict>
            <key>familySharingPolicy</key><string>deny</string>
            <key>gracePeriodPolicy</key><dict><key>grantDuringGracePeriod</key><true/><key>grantDuringBillingRetry</key><false/></dict>
            <key>onlineChecks</key><false/>
            <key>localOnlyJWS</key><false/>
            <key>apiKey</key><dict><key>env</key><string>TEST_API_KEY</string></dict>
            \(extraEntries)
        </dict>
        </plist>
        """
    }

    static func decode(_ text: String, _ format: ConfigFormat, name: String = "com.test.app",
                       expectedBundleId: String? = "com.test.app") throws(VerificationError) -> AppPolicy {
        try ConfigLoader.decodeAppPolicy(Data(text.utf8), format: format, displayName: "\(name).\(format.rawValue)",
                                         baseDirectory: URL(fileURLWithPath: "/tmp"), expectedBundleId: expectedBundleId)
    }

    /// The refusal thrown by `body`; fails the test if nothing is thrown.
    static func refusal(_ body: () throws(VerificationError) -> Void, file: StaticString = #filePath,
                        line: UInt = #line) -> VerificationError? {
        do {
            try body()
            XCTFail("expected a refusal", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    static func makeTempDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("iapgw-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}
