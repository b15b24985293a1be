import AppleTrust
import Foundation
import IAPCore
import TestSupport
import XCTest

/// Refusal messages quote client input only as a bounded, printable excerpt: no control
/// characters, invisible format characters or markup come back, over real HTTP.
final class RefusalMessageExcerptTests: XCTestCase {
    static let hostile = "\u{0}\u{7}\u{2063}<script>\"\\"

    private func assertClean(_ answer: GatewayAnswer, code: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(answer.errorCode, code, answer.text, file: file, line: line)
        let message = answer.json["error"]?["message"]?.stringValue ?? ""
        XCTAssertFalse(message.isEmpty, answer.text, file: file, line: line)
        XCTAssertTrue(message.unicodeScalars.allSatisfy { (0x20...0x7E).contains($0.value) }, message, file: file, line: line)
        // Quotes the message itself sets around an excerpt stay; none of the input's.
        for fragment in ["<", ">", "\\", "\"\"", "script>"] {
            XCTAssertFalse(message.contains(fragment), "\(fragment) in \(message)", file: file, line: line)
        }
        XCTAssertLessThanOrEqual(message.count, 400, message, file: file, line: line)
    }

    func testOfferSignatureRefusalsQuoteTheOfferAndProductAsExcerpts() async throws {
        let gw = try await GatewayE2E.start(self) { options in
            options.extraPolicyXML = """
                <promotionalOffers type="array">
                    <item><productId>\(GatewayE2E.monthly)</productId><offerId>ANYONE10</offerId><audience>anyone</audience></item>
                </promotionalOffers>
                """
        }
        let unknownOffer = try await gw.post("offer-signatures", [
            "account": "ann", "productId": .string(GatewayE2E.monthly + Self.hostile), "format": "v2",
            "promotionalOffer": .string("ANYONE10\u{2063}\u{7}" + String(repeating: "A", count: 500)),
        ])
        XCTAssertEqual(unknownOffer.status, 403, unknownOffer.text)
        assertClean(unknownOffer, code: "OFFER_NOT_ALLOWED")
        let message = unknownOffer.json["error"]?["message"]?.stringValue ?? ""
        XCTAssertTrue(message.contains("ANYONE10??AAAA"), message)
        XCTAssertFalse(message.contains(String(repeating: "A", count: 100)), "bounded: \(message)")
    }

    func testRequestAndPathRefusalsQuoteTheirInputAsExcerpts() async throws {
        let gw = try await GatewayE2E.start(self)

        let member = try await gw.post("verify", ["account": "ann", "transactionId": "1", "x\(Self.hostile)": "1"])
        XCTAssertEqual(member.status, 400, member.text)
        assertClean(member, code: "MALFORMED_REQUEST")

        let app = try await gw.send("GET", "\(gw.harness.gatewayURL)/v1/apps/com.evil%00%3Cscript%3E%E2%81%A3/accounts/a/entitlements")
        XCTAssertEqual(app.status, 404, app.text)
        assertClean(app, code: "UNKNOWN_APP")

        let query = try await gw.send("GET", "\(gw.appURL)/accounts/ann/history?%3Cb%3E%07=1")
        XCTAssertEqual(query.status, 400, query.text)
        assertClean(query, code: "MALFORMED_REQUEST")
    }

    func testAJWSHeaderAlgIsQuotedAsAnExcerpt() async throws {
        let gw = try await GatewayE2E.start(self)
        let bought = try gw.buy(GatewayE2E.removeAds, owner: "device-alg")
        let parts = bought.signedTransaction.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard case .object(var header) = try StrictJSON().parse(try Base64URL.decode(parts[0])) else {
            return XCTFail("the simulator's header is not an object")
        }
        header["alg"] = .string("ES256" + Self.hostile)
        let forged = ([Base64URL.encode(Array(JSONValue.object(header).jsonText.utf8))] + parts.dropFirst()).joined(separator: ".")

        let answer = try await gw.verifySigned(forged, account: "alg")

        XCTAssertEqual(answer.status, 422, answer.text)
        assertClean(answer, code: "UNSUPPORTED_ALGORITHM")
    }
}
