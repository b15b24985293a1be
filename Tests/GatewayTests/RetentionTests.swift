import AppStoreSimulator
import AppleTrust
import Foundation
import IAPCore
import TestSupport
import UpstreamHTTP
import XCTest

/// POST /v1/retention/{bundleId} over real HTTP: the simulator, as the App Store, signs realtime
/// requests; the gateway answers by the app's rules and what it knows of the account, signs the
/// offers it makes, refuses what Apple did not sign for this app, and audits every answer.
final class RetentionTests: XCTestCase {
    static let monthly = GatewayE2E.monthly
    static let premium = NotificationE2E.premium
    static let french = "0b7a3c1e-0000-4000-8000-000000000001"
    static let longTimer = "0b7a3c1e-0000-4000-8000-000000000002"
    static let offer = "0b7a3c1e-0000-4000-8000-000000000003"
    static let alternate = "0b7a3c1e-0000-4000-8000-000000000004"

    /// In order: French speakers get a message; subscribers of 30 days or more another; current
    /// subscribers without a refund a signed offer; everyone else on monthly the premium plan.
    private func start() async throws -> NotificationE2E {
        try await NotificationE2E.start(self) { options in
            options.extraPolicyXML = """
                <promotionalOffers type="array">
                    <item><productId>\(Self.monthly)</productId><offerId>STAY1</offerId><audience>subscribers</audience></item>
                </promotionalOffers>
                <retentionMessages type="array">
                    <item><locales type="array"><item>fr</item></locales><message><messageIdentifier>\(Self.french)</messageIdentifier></message></item>
                    <item><productIds type="array"><item>\(Self.monthly)</item></productIds>
                        <minimumTenureDays type="integer">30</minimumTenureDays>
                        <message><messageIdentifier>\(Self.longTimer)</messageIdentifier></message></item>
                    <item><productIds type="array"><item>\(Self.monthly)</item></productIds>
                        <states type="array"><item>active</item></states><noRefund type="bool">true</noRefund>
                        <promotionalOffer><messageIdentifier>\(Self.offer)</messageIdentifier><offerId>STAY1</offerId></promotionalOffer></item>
                    <item><productIds type="array"><item>\(Self.monthly)</item></productIds>
                        <alternateProduct><messageIdentifier>\(Self.alternate)</messageIdentifier><productId>\(Self.premium)</productId></alternateProduct></item>
                </retentionMessages>
                """
        }
    }

    private var url: (NotificationE2E) -> String { { "\($0.gw.harness.gatewayURL)/v1/retention/\($0.bundleId)" } }

    private func ask(_ e2e: NotificationE2E, _ chain: String, locale: String = "en-US") async throws -> GatewayAnswer {
        let response = try await e2e.simulator.sendRealtimeRequest(originalTransactionId: chain, userLocale: locale,
                                                                   to: url(e2e), client: e2e.gw.client)
        return GatewayAnswer(status: response.status, headers: response.headers, body: response.body)
    }

    private func postRaw(_ e2e: NotificationE2E, _ signedPayload: String) async throws -> GatewayAnswer {
        try await e2e.gw.send("POST", url(e2e), body: Array(JSONValue.object(["signedPayload": .string(signedPayload)]).jsonText.utf8),
                              apiKey: .some(nil))
    }

    func testAnswersFollowTheRulesAndWhatTheGatewayKnowsOfTheAccount() async throws {
        let e2e = try await start()
        let serverKey = try ECPrivateKey(pkcs8PEM: String(contentsOf: e2e.gw.harness.directory
            .appendingPathComponent("secrets/AuthKey.p8"), encoding: .utf8))

        let ann = try e2e.subscribe(owner: "device-ann")
        try await e2e.claim(ann, account: "ann")
        let old = try e2e.simulator.purchase(PurchaseRequest(
            bundleId: e2e.bundleId, productId: Self.monthly, type: .autoRenewable, owner: "device-old",
            subscriptionGroupIdentifier: "demo.pro", periodSeconds: 365 * 86_400, price: 4_990,
            purchaseDate: Date().addingTimeInterval(-40 * 86_400)))
        try await e2e.claim(old, account: "old")
        let cy = try e2e.subscribe(owner: "device-cy")
        try await e2e.claim(cy, account: "cy")
        let cyAds = try e2e.gw.buy(GatewayE2E.removeAds, owner: "device-cy")
        try await e2e.claim(cyAds, account: "cy")
        try await e2e.deliver("REFUND", about: try e2e.simulator.refund(transactionId: cyAds.transactionId))
        let stranger = try e2e.subscribe(owner: "device-stranger")  // never verified through the gateway
        let premium = try e2e.simulator.purchase(PurchaseRequest(
            bundleId: e2e.bundleId, productId: Self.premium, type: .autoRenewable, owner: "device-pia",
            subscriptionGroupIdentifier: "demo.pro", price: 9_990))
        try await e2e.claim(premium, account: "pia")

        // A current subscriber without a refund: a promotional offer, signed with the app's key.
        let offered = try await ask(e2e, ann.originalTransactionId)
        XCTAssertEqual(offered.status, 200, offered.text)
        let promotional = try XCTUnwrap(offered.json["promotionalOffer"])
        XCTAssertEqual(offered.json.objectValue?.count, 1)
        XCTAssertEqual(promotional["messageIdentifier"]?.stringValue, Self.offer)
        let jws = try XCTUnwrap(promotional["promotionalOfferSignatureV2"]?.stringValue)
        try OpenSSLTool.verifyJWS(jws, key: serverKey)
        let claims = try StrictJSON().parse(try Base64URL.decode(String(jws.split(separator: ".")[1])))
        XCTAssertEqual(claims["aud"]?.stringValue, OfferSigner.promotionalOfferAudience)
        XCTAssertEqual(claims["productId"]?.stringValue, Self.monthly)
        XCTAssertEqual(claims["offerIdentifier"]?.stringValue, "STAY1")
        XCTAssertEqual(claims["transactionId"]?.stringValue, ann.originalTransactionId)
        XCTAssertEqual(claims["bid"]?.stringValue, e2e.bundleId)

        // The same subscriber in French: the locale rule comes first.
        let french = try await ask(e2e, ann.originalTransactionId, locale: "fr-FR")
        XCTAssertEqual(french.json, .object(["message": .object(["messageIdentifier": .string(Self.french)])]), french.text)
        // Forty days of tenure.
        let tenured = try await ask(e2e, old.originalTransactionId)
        XCTAssertEqual(tenured.json, .object(["message": .object(["messageIdentifier": .string(Self.longTimer)])]), tenured.text)
        // A refund elsewhere in the account, or a chain the gateway does not know: no offer.
        for chain in [cy.originalTransactionId, stranger.originalTransactionId] {
            let answer = try await ask(e2e, chain)
            XCTAssertEqual(answer.json, .object(["alternateProduct": .object(["messageIdentifier": .string(Self.alternate),
                                                                              "productId": .string(Self.premium)])]), answer.text)
        }
        // No rule for premium: {} (Apple shows its default message).
        let none = try await ask(e2e, premium.originalTransactionId)
        XCTAssertEqual(none.status, 200)
        XCTAssertEqual(none.json, .object([:]))

        // Every answer audited: its chain, product, account and the answer chosen.
        let audit = try e2e.ledger.auditRecords(bundleId: e2e.bundleId, limit: 100).filter { $0.evidenceKind.hasPrefix("retention") }
        XCTAssertEqual(audit.map(\.evidenceKind), ["retention.none", "retention.alternateProduct", "retention.alternateProduct",
                                                   "retention.message", "retention.message", "retention.promotionalOffer"])
        XCTAssertEqual(audit.last?.account, "ann")
        XCTAssertEqual(audit.last?.transactionIds, [ann.originalTransactionId])
        XCTAssertEqual(audit[1].account, nil, "the stranger's chain has no account")
    }

    func testForgedForeignAndMisdirectedRequestsAreRefusedAndNothingIsOffered() async throws {
        let e2e = try await start()
        let ann = try e2e.subscribe(owner: "device-ann")
        try await e2e.claim(ann, account: "ann")
        let genuine = try e2e.simulator.signedRealtimeRequest(originalTransactionId: ann.originalTransactionId)

        // Forged: the payload changed after Apple signed it (another product).
        let parts = genuine.split(separator: ".").map(String.init)
        var payload = try XCTUnwrap(try StrictJSON().parse(try Base64URL.decode(parts[1])).objectValue)
        payload["productId"] = .string(Self.premium)
        let forged = [parts[0], Base64URL.encode(Array(JSONValue.object(payload).jsonText.utf8)), parts[2]].joined(separator: ".")
        // Foreign: genuinely signed, for another app (its app Apple id).
        try e2e.simulator.registerApp(bundleId: "com.example.other", appAppleId: 987_654_321, sharedSecret: "other")
        let otherChain = try e2e.simulator.purchase(PurchaseRequest(
            bundleId: "com.example.other", productId: Self.monthly, type: .autoRenewable, owner: "device-ann",
            subscriptionGroupIdentifier: "demo.pro", price: 4_990))
        let foreign = try e2e.simulator.signedRealtimeRequest(originalTransactionId: otherChain.originalTransactionId)
        // Misdirected: a genuine notification of this app is not a realtime request.
        let notification = try await e2e.signed("DID_RENEW", about: ann)

        for (what, jws, code) in [("forged", forged, "INVALID_SIGNATURE"), ("foreign", foreign, "APP_APPLE_ID_MISMATCH"),
                                  ("a notification", notification, "WRONG_PAYLOAD_KIND")] {
            let answer = try await postRaw(e2e, jws)
            XCTAssertEqual(answer.status, 422, "\(what): \(answer.text)")
            XCTAssertEqual(answer.errorCode, code, what)
            XCTAssertNil(answer.json["promotionalOffer"], what)
        }
        let malformed = try await e2e.gw.send("POST", url(e2e), body: Array(#"{"signedPayload":1}"#.utf8), apiKey: .some(nil))
        XCTAssertEqual(malformed.status, 400)
        let unknownApp = try await e2e.gw.send("POST", "\(e2e.gw.harness.gatewayURL)/v1/retention/com.example.nope",
                                               body: Array(JSONValue.object(["signedPayload": .string(genuine)]).jsonText.utf8),
                                               apiKey: .some(nil))
        XCTAssertEqual(unknownApp.status, 404)

        // The refusals are audited as refused, with their codes; the genuine request still answers.
        let refused = try e2e.ledger.auditRecords(bundleId: e2e.bundleId, limit: 100).filter { $0.evidenceKind == "retention" }
        XCTAssertEqual(refused.map(\.errorCode?.rawValue),
                       ["MALFORMED_REQUEST", "WRONG_PAYLOAD_KIND", "APP_APPLE_ID_MISMATCH", "INVALID_SIGNATURE"])
        XCTAssertTrue(refused.allSatisfy { $0.verdict == .refused })
        let answer = try await postRaw(e2e, genuine)
        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertNotNil(answer.json["promotionalOffer"])
    }

    /// Apple signs a realtime request as it asks: one signed longer ago than the verifier's clock-skew
    /// allowance (60 s) is a replay, refused 422 SIGNED_DATE_TOO_OLD and audited, nothing offered;
    /// one signed within it is answered, and answered again when it is retried.
    func testACapturedRequestReplayedLaterIsRefusedAndARetryWithinTheSkewIsAnswered() async throws {
        let e2e = try await start()
        let ann = try e2e.subscribe(owner: "device-ann")
        try await e2e.claim(ann, account: "ann")
        let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
        let captured = try e2e.simulator.signedRealtimeRequest(originalTransactionId: ann.originalTransactionId,
                                                               signedDate: nowMs - 5 * 60_000)
        let replayed = try await postRaw(e2e, captured)
        XCTAssertEqual(replayed.status, 422, replayed.text)
        XCTAssertEqual(replayed.errorCode, "SIGNED_DATE_TOO_OLD")
        XCTAssertNil(replayed.json["promotionalOffer"])

        let recent = try e2e.simulator.signedRealtimeRequest(originalTransactionId: ann.originalTransactionId,
                                                             signedDate: nowMs - 20_000)
        for attempt in 1...2 {
            let answer = try await postRaw(e2e, recent)
            XCTAssertEqual(answer.status, 200, "attempt \(attempt): \(answer.text)")
            XCTAssertNotNil(answer.json["promotionalOffer"], "attempt \(attempt): \(answer.text)")
        }
        let audit = try e2e.ledger.auditRecords(bundleId: e2e.bundleId, limit: 10).filter { $0.evidenceKind.hasPrefix("retention") }
        XCTAssertEqual(audit.map(\.evidenceKind), ["retention.promotionalOffer", "retention.promotionalOffer", "retention"])
        XCTAssertEqual(audit.map(\.errorCode), [nil, nil, .signedDateTooOld])
    }

    func testAnAppWithoutRetentionRulesAnswersApplesDefaultMessage() async throws {
        let e2e = try await NotificationE2E.start(self)
        let ann = try e2e.subscribe(owner: "device-ann")
        try await e2e.claim(ann, account: "ann")
        let answer = try await ask(e2e, ann.originalTransactionId)
        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(answer.json, .object([:]))
        let audit = try e2e.ledger.auditRecords(bundleId: e2e.bundleId, limit: 10).filter { $0.evidenceKind.hasPrefix("retention") }
        XCTAssertEqual(audit.map(\.evidenceKind), ["retention.none"])
    }
}
