import Foundation
import XCTest
@testable import IAPConfig
@testable import IAPCore

/// Hostile and broken files: nothing is loaded from outside the file, nothing expands, nothing
/// malformed is "recovered", and every refusal says where.
final class ConfigSecurityTests: XCTestCase {
    typealias S = ConfigTestSupport

    private func tree(_ text: String, _ format: ConfigFormat) throws(VerificationError) -> ConfigNode {
        try ConfigFormat.readTree(Data(text.utf8), format: format, displayName: "evil.\(format.rawValue)", rootElement: "app")
    }

    func testExternalEntityPointingAtALocalFileIsRefusedAndItsContentNeverAppears() throws {
        let dir = try S.makeTempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let secretFile = dir.appendingPathComponent("hostname")
        let marker = "XXE-MARKER-\(UUID().uuidString)"
        try Data(marker.utf8).write(to: secretFile)
        let xml = """
            <?xml version="1.0"?>
            <!DOCTYPE app [ <!ENTITY leak SYSTEM "file://\(secretFile.path)"> ]>
            <app bundleId="com.test.app"><familySharingPolicy>&leak;</familySharingPolicy></app>
            """
        let plist = """
            <?xml version="1.0"?>
            <!DOCTYPE plist [ <!ENTITY leak SYSTEM "file://\(secretFile.path)"> ]>
            <plist version="1.0"><dict><key>bundleId</key><string>&leak;</string></dict></plist>
            """
        for (text, format) in [(xml, ConfigFormat.xml), (plist, .plist)] {
            let error = S.refusal { () throws(VerificationError) in _ = try S.decode(text, format) }
            XCTAssertEqual(error?.code, .invalidConfiguration)
            XCTAssertEqual(error?.message, "com.test.app.\(format.rawValue):2: entity declarations are not allowed")
            XCTAssertFalse(error?.description.contains(marker) ?? true)
        }
    }

    func testBillionLaughsInternalEntitiesAreRefused() {
        var doctype = "<!DOCTYPE app [ <!ENTITY lol \"lol\">"
        for i in 1...9 { doctype += "<!ENTITY lol\(i) \"" + String(repeating: "&lol\(i == 1 ? "" : String(i - 1));", count: 10) + "\">" }
        let text = "<?xml version=\"1.0\"?>\n\(doctype) ]>\n<app><bundleId>&lol9;</bundleId></app>"
        let error = S.refusal { () throws(VerificationError) in _ = try tree(text, .xml) }
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertEqual(error?.message, "evil.xml:2: entity declarations are not allowed")
    }

    func testDoctypeIsRefusedInPlainXMLAndInternalSubsetRefusedInPlist() {
        let xmlError = S.refusal { () throws(VerificationError) in _ = try tree("<!DOCTYPE app SYSTEM \"app.dtd\">\n<app/>", .xml) }
        XCTAssertEqual(xmlError?.message, "evil.xml:1: DOCTYPE is not allowed")
        let plistError = S.refusal { () throws(VerificationError) in
            _ = try tree("<?xml version=\"1.0\"?>\n<!DOCTYPE plist [ <!ELEMENT plist ANY> ]>\n<plist><dict/></plist>", .plist)
        }
        XCTAssertEqual(plistError?.message,
                       "evil.plist:2: only the standard plist DOCTYPE, without an internal subset, is allowed")
    }

    func testPlistDoctypeWithAnotherExternalDTDIsRefused() throws {
        let dir = try S.makeTempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let dtd = dir.appendingPathComponent("evil.dtd")
        try Data("<!ENTITY leak SYSTEM \"file:///etc/hostname\">".utf8).write(to: dtd)
        let text = "<?xml version=\"1.0\"?>\n<!DOCTYPE plist SYSTEM \"file://\(dtd.path)\">\n<plist><dict><key>bundleId</key><string>&leak;</string></dict></plist>"
        let error = S.refusal { () throws(VerificationError) in _ = try tree(text, .plist) }
        XCTAssertEqual(error?.message,
                       "evil.plist:2: only the standard plist DOCTYPE, without an internal subset, is allowed")
    }

    func testUndeclaredEntityReferenceIsRefused() {
        let error = S.refusal { () throws(VerificationError) in _ = try tree("<app>\n<bundleId>&nope;</bundleId></app>", .xml) }
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertTrue(error?.message.hasPrefix("evil.xml:2: ") == true, error?.message ?? "")
    }

    func testNonUTF8EncodingIsRefusedSoByteGuardsSeeWhatTheParserSees() {
        var utf16 = Data([0xFF, 0xFE])
        utf16.append("<?xml version=\"1.0\" encoding=\"UTF-16\"?><app/>".data(using: .utf16LittleEndian)!)
        let error = S.refusal { () throws(VerificationError) in
            _ = try ConfigFormat.readTree(utf16, format: .xml, displayName: "evil.xml", rootElement: "app")
        }
        XCTAssertEqual(error?.message, "evil.xml: not UTF-8 text")
        let declared = S.refusal { () throws(VerificationError) in _ = try tree("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><app/>", .xml) }
        XCTAssertEqual(declared?.message, "evil.xml:1: only UTF-8 encoding is accepted")
    }

    func testMalformedXMLIsRefusedWithItsLineNumber() {
        let text = "<?xml version=\"1.0\"?>\n<app bundleId=\"com.test.app\">\n  <routing>\n    <receipt>legacy</routing>\n</app>\n"
        let error = S.refusal { () throws(VerificationError) in _ = try S.decode(text, .xml) }
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertEqual(error?.message, "com.test.app.xml:4: mismatched tag")
    }

    func testTruncatedXMLIsRefusedNotRecovered() {
        let text = S.appXML().replacingOccurrences(of: "</app>\n", with: "")
        let error = S.refusal { () throws(VerificationError) in _ = try S.decode(text, .xml) }
        XCTAssertEqual(error?.code, .invalidConfiguration)
    }

    func testMalformedPlistIsRefused() {
        let text = S.appPlist().replacingOccurrences(of: "<key>onlineChecks</key><false/>", with: "<key>onlineChecks</key><false>")
        let error = S.refusal { () throws(VerificationError) in _ = try S.decode(text, .plist) }
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertTrue(error?.message.hasPrefix("com.test.app.plist:") == true, error?.message ?? "")
    }

    func testOldStylePlistAndBareWordGarbageAreRefused() {
        for text in ["garbage", "{ bundleId = \"com.test.app\"; }", "(a, b)"] {
            let error = S.refusal { () throws(VerificationError) in _ = try S.decode(text, .plist) }
            XCTAssertEqual(error?.code, .invalidConfiguration, text)
        }
    }

    func testBinaryPlistIsRefused() throws {
        let binary = try PropertyListSerialization.data(fromPropertyList: ["bundleId": "com.test.app"], format: .binary, options: 0)
        let error = S.refusal { () throws(VerificationError) in
            _ = try ConfigLoader.decodeAppPolicy(binary, format: .plist, displayName: "b.plist", baseDirectory: URL(fileURLWithPath: "/tmp"))
        }
        XCTAssertEqual(error?.code, .invalidConfiguration)
    }

    func testDuplicatePlistKeyIsRefusedNotLastOneWins() {
        let text = S.appPlist(extraEntries: "<key>onlineChecks</key><true/>")
        let error = S.refusal { () throws(VerificationError) in _ = try S.decode(text, .plist) }
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertTrue(error?.message.hasSuffix(": onlineChecks: duplicate key") == true, error?.message ?? "")
    }

    func testOversizedFileIsRefusedAsInputTooLarge() throws {
        let padding = "<!--" + String(repeating: "x", count: ConfigLoader.maxFileBytes) + "-->"
        let text = S.appXML(body: padding + S.validXMLBody)
        let error = S.refusal { () throws(VerificationError) in _ = try S.decode(text, .xml) }
        XCTAssertEqual(error?.code, .inputTooLarge)

        let dir = try S.makeTempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data(text.utf8).write(to: dir.appendingPathComponent("com.test.app.xml"))
        let fileError = S.refusal { () throws(VerificationError) in _ = try ConfigLoader.loadApps(directory: dir) }
        XCTAssertEqual(fileError?.code, .inputTooLarge)
    }

    /// Found by FuzzConfig: FoundationXML on Linux dereferences NULL on a data-less processing instruction.
    func testProcessingInstructionsAreRefusedBeforeTheParserSeesThem() {
        for (text, line) in [("<?Optional?>\n<app/>", 1), ("<?xml version=\"1.0\"?>\n<app>\n<?x?></app>", 3),
                             ("\n<?xml version=\"1.0\"?><app/>", 2)] {
            let error = S.refusal { () throws(VerificationError) in _ = try tree(text, .xml) }
            XCTAssertEqual(error?.message,
                           "evil.xml:\(line): processing instructions are not allowed (the XML declaration must come first)", text)
        }
    }

    func testDeepNestingIsRefused() {
        let text = "<app>" + String(repeating: "<a>", count: 100) + String(repeating: "</a>", count: 100) + "</app>"
        let error = S.refusal { () throws(VerificationError) in _ = try tree(text, .xml) }
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertTrue(error?.message.contains("nested too deeply") == true, error?.message ?? "")
    }
}
