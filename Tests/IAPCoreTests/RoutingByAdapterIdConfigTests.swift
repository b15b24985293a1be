import Foundation
import IAPConfig
import IAPCore
import XCTest

/// An app file's routing names adapters as open values: the presets mean what they always meant, an
/// adapter id or `{answering, compared, beside}` names adapters directly, and every id is checked
/// against the adapters the gateway runs (`AdapterCatalog`).
final class RoutingByAdapterIdConfigTests: XCTestCase {
    typealias S = ConfigTestSupport

    private func decode(receipt: String, extra: String = "", adapters: AdapterCatalog = .standard) throws(VerificationError)
        -> AppPolicy {
        let body = S.validXMLBody.replacingOccurrences(of: "<receipt>legacy</receipt>", with: "<receipt>\(receipt)</receipt>\(extra)")
        return try ConfigLoader.decodeAppPolicy(Data(S.appXML(body: body).utf8), format: .xml, displayName: "com.test.app.xml",
                                                baseDirectory: URL(fileURLWithPath: "/tmp"), expectedBundleId: "com.test.app",
                                                adapters: adapters)
    }

    private func refusal(receipt: String, extra: String = "", adapters: AdapterCatalog = .standard) -> String {
        S.refusal { () throws(VerificationError) in _ = try decode(receipt: receipt, extra: extra, adapters: adapters) }?.message ?? ""
    }

    func testEveryPresetLoadsAsTheAdaptersItAlwaysNamed() throws {
        let expected: [(String, AppPolicy.RoutingMode)] = [
            ("legacy", .init(answering: .verifyReceipt)), ("serverAPI", .init(answering: .serverAPI)),
            ("shadow", .init(answering: .verifyReceipt, compared: (.serverAPI, .shadow))),
            ("compare", .init(answering: .serverAPI, compared: (.verifyReceipt, .compare))),
            ("cutover", .init(answering: .serverAPI, compared: (.verifyReceipt, .cutover))),
        ]
        XCTAssertEqual(expected.map(\.0), AppPolicy.RoutingMode.configWords.map(\.0))
        for (word, mode) in expected {
            let routing = try decode(receipt: word).routing
            XCTAssertEqual(routing.receipt, mode, word)
            XCTAssertEqual(routing.receipt.description, word)
            XCTAssertEqual(routing[.transactionId], .serverAPI)
        }
    }

    func testAnAdapterIdAndTheLongFormNameAdaptersDirectly() throws {
        XCTAssertEqual(try decode(receipt: "verifyReceipt").routing.receipt, .legacy)
        let long = #"<answering>serverAPI</answering><compared>verifyReceipt</compared><beside>shadow</beside>"#
        let mode = try decode(receipt: long).routing.receipt
        XCTAssertEqual(mode, .init(answering: .serverAPI, compared: (.verifyReceipt, .shadow)))
        XCTAssertEqual(mode.generations?.from, .serverAPI, "shadow answers with the generation migrated from")
        XCTAssertEqual(mode.description, "serverAPI+shadow:verifyReceipt")
    }

    func testAnUnknownAdapterIsRefusedNamingItAndTheKnownOnes() {
        XCTAssertTrue(refusal(receipt: "legacyy").hasSuffix(
            "routing.receipt: \"legacyy\" is neither a routing preset (legacy, serverAPI, shadow, compare, cutover) nor a known adapter (serverAPI, verifyReceipt)"),
                      refusal(receipt: "legacyy"))
        let unknownCompared = refusal(receipt: "<answering>serverAPI</answering><compared>loyalty</compared><beside>compare</beside>")
        XCTAssertTrue(unknownCompared.contains("routing.receipt.compared: \"loyalty\" is neither"), unknownCompared)
        let besideAlone = refusal(receipt: "<answering>serverAPI</answering><beside>compare</beside>")
        XCTAssertTrue(besideAlone.hasSuffix("routing.receipt.beside: goes with compared"), besideAlone)
        let itself = refusal(receipt: "<answering>serverAPI</answering><compared>serverAPI</compared><beside>compare</beside>")
        XCTAssertTrue(itself.hasSuffix("an adapter is not compared with itself"), itself)
    }

    func testAKindIsRoutableOnlyToAnAdapterThatVerifiesIt() throws {
        let coupons = AdapterCatalog(AdapterCatalog.standard.kinds.map { ($0.key, Array($0.value)) }
                                     + [(AdapterID(rawValue: "coupons"), [AppPolicy.EvidenceKind(rawValue: "coupon")])])
        let policy = try decode(receipt: "legacy", extra: "<coupon>coupons</coupon>", adapters: coupons)
        XCTAssertEqual(policy.routing[AppPolicy.EvidenceKind(rawValue: "coupon")], .init(answering: AdapterID(rawValue: "coupons")))
        XCTAssertTrue(policy.summary.contains("coupon=coupons"), policy.summary)
        // Receipts to an adapter that verifies coupons only; coupons where no adapter verifies them.
        let wrongKind = refusal(receipt: "coupons", adapters: coupons)
        XCTAssertTrue(wrongKind.hasSuffix("routing.receipt: coupons routes to coupons, which does not verify receipt evidence (verified by: serverAPI, verifyReceipt)"),
                      wrongKind)
        XCTAssertTrue(refusal(receipt: "legacy", extra: "<coupon>coupons</coupon>").hasSuffix("routing.coupon: unknown key"))
    }
}
