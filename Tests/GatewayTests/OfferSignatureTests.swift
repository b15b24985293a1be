import AppStoreSimulator
import AppleTrust
import Demo
import Foundation
import Gateway
import IAPCore
import TestSupport
import XCTest

/// POST /v1/apps/{bundleId}/offer-signatures over real HTTP: every signature verified with the
/// `openssl` tool, every payload cross-checked against Apple's Python library's creators
/// (Scripts/apple-offer-signatures.py), and the policy's audiences refusing everyone else.
final class OfferSignatureTests: XCTestCase {
    static let monthly = GatewayE2E.monthly
    static let premium = NotificationE2E.premium

    /// Three offers: anyone's on monthly, current subscribers' on premium, a win-back on monthly;
    /// the group is both subscriptions. `offerSigning` (when given) is XML for the app file.
    private func start(offerSigning: String = "") async throws -> NotificationE2E {
        let group = "<groupProductIds type=\"array\"><item>\(Self.monthly)</item><item>\(Self.premium)</item></groupProductIds>"
        return try await NotificationE2E.start(self) { options in
            options.extraPolicyXML = offerSigning + """
                <promotionalOffers type="array">
                    <item><productId>\(Self.monthly)</productId><offerId>ANY1</offerId><audience>anyone</audience></item>
                    <item><productId>\(Self.premium)</productId><offerId>LOYAL1</offerId><audience>subscribers</audience>\(group)</item>
                    <item><productId>\(Self.monthly)</productId><offerId>WINBACK1</offerId><audience>winBack</audience>\(group)</item>
                </promotionalOffers>
                """
        }
    }

    private func sign(_ e2e: NotificationE2E, _ body: [String: JSONValue]) async throws -> GatewayAnswer {
        try await e2e.gw.post("offer-signatures", body)
    }

    func testV1SignatureIsApplesPayloadSignedWithTheOfferSigningKey() async throws {
        let offerKey = try ECPrivateKey.generate()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("offers-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let keyFile = directory.appendingPathComponent("offers.p8")
        try Data(offerKey.pkcs8PEM.utf8).write(to: keyFile)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile.path)
        let e2e = try await start(offerSigning: "<offerSigning><keyId>OFFERKEY7</keyId><privateKey><file>\(keyFile.path)</file></privateKey></offerSigning>")

        let answer = try await sign(e2e, ["account": "ann", "productId": .string(Self.monthly),
                                          "promotionalOffer": "ANY1", "format": "v1"])
        XCTAssertEqual(answer.status, 200, answer.text)
        let json = answer.json
        XCTAssertEqual(Set(json.objectValue?.keys.map { $0 } ?? []), ["format", "keyIdentifier", "nonce", "timestamp", "signature"])
        XCTAssertEqual(json["format"]?.stringValue, "v1")
        XCTAssertEqual(json["keyIdentifier"]?.stringValue, "OFFERKEY7")
        let nonce = try XCTUnwrap(json["nonce"]?.stringValue)
        XCTAssertEqual(nonce, UUID(uuidString: nonce)?.uuidString.lowercased())
        guard case .int(let timestamp)? = json["timestamp"] else { return XCTFail("timestamp: \(answer.text)") }
        XCTAssertLessThan(abs(timestamp - Int64(Date().timeIntervalSince1970 * 1000)), 60_000)
        let signature = try XCTUnwrap(Data(base64Encoded: try XCTUnwrap(json["signature"]?.stringValue)))

        // Apple's payload, written out here field by field (not through the gateway's code).
        let token = AppAccountToken.derive(bundleId: e2e.bundleId, account: "ann")
        let payload = [e2e.bundleId, "OFFERKEY7", Self.monthly, "ANY1", token.lowercased(), nonce, String(timestamp)]
            .joined(separator: "\u{2063}")
        try OpenSSLTool.verify(signatureDER: signature, over: Data(payload.utf8), key: offerKey, in: directory)
        // A byte changed anywhere in the payload must not verify: the check above can fail.
        XCTAssertThrowsError(try OpenSSLTool.verify(signatureDER: signature, over: Data((payload + "0").utf8),
                                                    key: offerKey, in: directory))

        // Apple's creator signs the same inputs; its signature verifies over the same payload, so
        // the payload written above is Apple's.
        let apple = try AppleCreators.sign(["kind": "v1", "privateKey": .string(offerKey.pkcs8PEM), "keyId": "OFFERKEY7",
                                            "issuerId": "", "bundleId": .string(e2e.bundleId),
                                            "productId": .string(Self.monthly), "offerId": "ANY1",
                                            "appAccountToken": .string(token.uppercased()), "nonce": .string(nonce.uppercased()),
                                            "timestamp": .int(timestamp)])
        try OpenSSLTool.verify(signatureDER: try XCTUnwrap(Data(base64Encoded: apple)), over: Data(payload.utf8),
                               key: offerKey, in: directory)
    }

    func testV2AndIntroductoryEligibilityJWSAreApplesSignedWithTheServerAPIKey() async throws {
        let e2e = try await start()
        let serverKey = try ECPrivateKey(pkcs8PEM: String(contentsOf: e2e.gw.harness.directory
            .appendingPathComponent("secrets/AuthKey.p8"), encoding: .utf8))
        let credentials = try XCTUnwrap(e2e.gw.harness.service.apps[e2e.bundleId]?.serverAPI)
        let annSubscription = try e2e.subscribe(owner: "device-ann")
        try await e2e.claim(annSubscription, account: "ann")

        let v2 = try await sign(e2e, ["account": "ann", "productId": .string(Self.premium),
                                      "promotionalOffer": "LOYAL1", "format": "v2"])
        XCTAssertEqual(v2.status, 200, v2.text)
        XCTAssertEqual(v2.json["format"]?.stringValue, "v2")
        let v2JWS = try XCTUnwrap(v2.json["signature"]?.stringValue)
        try OpenSSLTool.verifyJWS(v2JWS, key: serverKey)
        let appleV2 = try AppleCreators.sign(["kind": "v2", "privateKey": .string(serverKey.pkcs8PEM),
                                              "keyId": .string(credentials.keyId), "issuerId": .string(credentials.issuerId),
                                              "bundleId": .string(e2e.bundleId), "productId": .string(Self.premium),
                                              "offerId": "LOYAL1", "transactionId": .string(annSubscription.originalTransactionId)])
        try assertSameClaims(v2JWS, appleV2)

        let intro = try await sign(e2e, ["account": "ann", "productId": .string(Self.monthly),
                                         "introductoryOfferEligibility": false])
        XCTAssertEqual(intro.status, 200, intro.text)
        XCTAssertEqual(intro.json["format"]?.stringValue, "introductoryOfferEligibility")
        let introJWS = try XCTUnwrap(intro.json["signature"]?.stringValue)
        try OpenSSLTool.verifyJWS(introJWS, key: serverKey)
        let appleIntro = try AppleCreators.sign(["kind": "introductoryOfferEligibility", "privateKey": .string(serverKey.pkcs8PEM),
                                                 "keyId": .string(credentials.keyId), "issuerId": .string(credentials.issuerId),
                                                 "bundleId": .string(e2e.bundleId), "productId": .string(Self.monthly),
                                                 "allow": false, "transactionId": .string(annSubscription.originalTransactionId)])
        try assertSameClaims(introJWS, appleIntro)
    }

    /// A keyed signature request retried (its answer lost) gets the same signature, nonce and time
    /// included; a new key gets a new one.
    func testAKeyedSignatureRequestIsAnsweredOnce() async throws {
        let e2e = try await start()
        let body = Array(JSONValue.object(["account": "kim", "productId": .string(Self.monthly),
                                           "promotionalOffer": "ANY1", "format": "v2"]).jsonText.utf8)
        let url = "\(e2e.gw.appURL)/offer-signatures"
        let first = try await e2e.gw.send("POST", url, body: body, headers: [("Idempotency-Key", "offer-1")])
        XCTAssertEqual(first.status, 200, first.text)
        let retried = try await e2e.gw.send("POST", url, body: body, headers: [("Idempotency-Key", "offer-1")])
        XCTAssertEqual(retried.body, first.body)
        XCTAssertEqual(retried.headers["idempotent-replayed"], "true")
        let fresh = try await e2e.gw.send("POST", url, body: body, headers: [("Idempotency-Key", "offer-2")])
        XCTAssertEqual(fresh.status, 200, fresh.text)
        XCTAssertNotEqual(fresh.body, first.body, "a new key signs anew (another nonce)")
        XCTAssertNil(fresh.headers["idempotent-replayed"])
    }

    func testThePolicyRefusesOffersOutsideTheirAudience() async throws {
        let e2e = try await start()
        func status(_ account: String, _ productId: String, offer: String) async throws -> (Int, String?) {
            let answer = try await sign(e2e, ["account": .string(account), "productId": .string(productId),
                                              "promotionalOffer": .string(offer), "format": "v2"])
            return (answer.status, answer.errorCode)
        }
        let refused = (403, Optional("OFFER_NOT_ALLOWED"))

        // ann subscribes and stays; bob's subscription expires; cy's too, and cy had a refund; dee
        // bought only the non-consumable.
        let ann = try e2e.subscribe(owner: "device-ann")
        try await e2e.claim(ann, account: "ann")
        let bob = try e2e.subscribe(owner: "device-bob")
        try await e2e.claim(bob, account: "bob")
        try await e2e.deliver("EXPIRED", "VOLUNTARY", about: try e2e.simulator.expire(originalTransactionId: bob.originalTransactionId))
        let cy = try e2e.subscribe(owner: "device-cy")
        try await e2e.claim(cy, account: "cy")
        try await e2e.deliver("EXPIRED", "VOLUNTARY", about: try e2e.simulator.expire(originalTransactionId: cy.originalTransactionId))
        let cyAds = try e2e.gw.buy(GatewayE2E.removeAds, owner: "device-cy")
        try await e2e.claim(cyAds, account: "cy")
        try await e2e.deliver("REFUND", about: try e2e.simulator.refund(transactionId: cyAds.transactionId))
        let dee = try e2e.gw.buy(GatewayE2E.removeAds, owner: "device-dee")
        try await e2e.claim(dee, account: "dee")

        // Never an offer or product the policy does not list.
        var result = try await status("ann", Self.monthly, offer: "NOPE")
        XCTAssertTrue(result == refused, "\(result)")
        result = try await status("ann", GatewayE2E.removeAds, offer: "ANY1")
        XCTAssertTrue(result == refused, "\(result)")
        // anyone: even an account the gateway has never seen.
        result = try await status("zed", Self.monthly, offer: "ANY1")
        XCTAssertEqual(result.0, 200)
        // subscribers: only while access lasts.
        result = try await status("ann", Self.premium, offer: "LOYAL1")
        XCTAssertEqual(result.0, 200)
        for account in ["bob", "dee", "zed"] {
            result = try await status(account, Self.premium, offer: "LOYAL1")
            XCTAssertTrue(result == refused, "\(account): \(result)")
        }
        // winBack: once subscribed, no longer, and never refunded.
        result = try await status("bob", Self.monthly, offer: "WINBACK1")
        XCTAssertEqual(result.0, 200)
        for account in ["ann", "cy", "dee", "zed"] {
            result = try await status(account, Self.monthly, offer: "WINBACK1")
            XCTAssertTrue(result == refused, "\(account): \(result)")
        }

        // Introductory offers: withholding is always allowed for a known customer; allowing only
        // for one who never subscribed and has no refund; Apple needs a transaction of the customer.
        func intro(_ account: String, _ allow: Bool, _ productId: String = Self.monthly) async throws -> (Int, String?) {
            let answer = try await sign(e2e, ["account": .string(account), "productId": .string(productId),
                                              "introductoryOfferEligibility": .bool(allow)])
            return (answer.status, answer.errorCode)
        }
        result = try await intro("dee", true)
        XCTAssertEqual(result.0, 200)
        result = try await intro("ann", false)
        XCTAssertEqual(result.0, 200)
        for (account, allow) in [("ann", true), ("bob", true), ("zed", false)] {
            result = try await intro(account, allow)
            XCTAssertTrue(result == refused, "\(account) \(allow): \(result)")
        }
        result = try await intro("dee", false, GatewayE2E.removeAds)
        XCTAssertTrue(result == refused, "\(result)")

        // Requests the route cannot read are the client's (400), never a signature.
        for body: [String: JSONValue] in [
            ["account": "ann", "productId": .string(Self.monthly), "promotionalOffer": "ANY1"],
            ["account": "ann", "productId": .string(Self.monthly), "promotionalOffer": "ANY1", "format": "v3"],
            ["account": "ann", "productId": .string(Self.monthly), "promotionalOffer": "ANY1", "format": "v1",
             "introductoryOfferEligibility": true],
            ["account": "ann", "productId": .string(Self.monthly), "introductoryOfferEligibility": "yes"],
            ["account": "ann", "promotionalOffer": "ANY1", "format": "v1"],
        ] {
            let answer = try await sign(e2e, body)
            XCTAssertEqual(answer.status, 400, "\(body): \(answer.text)")
            XCTAssertEqual(answer.errorCode, "MALFORMED_REQUEST")
        }
        let unauthenticated = try await e2e.gw.post("offer-signatures", ["account": "ann", "productId": .string(Self.monthly),
                                                                         "promotionalOffer": "ANY1", "format": "v1"],
                                                    apiKey: .some("wrong"))
        XCTAssertEqual(unauthenticated.status, 401)
    }

    func testPromotionalOffersMustNameSubscriptionsOfTheCatalog() async throws {
        do {
            _ = try await NotificationE2E.start(self) { options in
                options.extraPolicyXML = """
                    <promotionalOffers type="array">
                        <item><productId>\(GatewayE2E.removeAds)</productId><offerId>X</offerId><audience>anyone</audience></item>
                    </promotionalOffers>
                    """
            }
            XCTFail("a promotional offer on a non-consumable was accepted")
        } catch let error as VerificationError {
            XCTAssertEqual(error.code, .invalidConfiguration)
            XCTAssertTrue(error.message.contains("promotionalOffers"), error.message)
        }
    }

    /// The gateway's JWS and Apple's creator's for the same inputs: the same header, the same
    /// claims with the same values, save the two Apple makes fresh each time (nonce, iat).
    private func assertSameClaims(_ ours: String, _ apples: String, file: StaticString = #filePath, line: UInt = #line) throws {
        func parts(_ jws: String) throws -> (JSONValue, [String: JSONValue]) {
            let segments = jws.split(separator: ".").map(String.init)
            XCTAssertEqual(segments.count, 3, file: file, line: line)
            let header = try StrictJSON().parse(try Base64URL.decode(segments[0]))
            guard case .object(let claims) = try StrictJSON().parse(try Base64URL.decode(segments[1])) else {
                throw VerificationError(.malformedJSON, "claims")
            }
            return (header, claims)
        }
        let (ourHeader, ourClaims) = try parts(ours)
        let (appleHeader, appleClaims) = try parts(apples)
        XCTAssertEqual(ourHeader, appleHeader, file: file, line: line)
        XCTAssertEqual(Set(ourClaims.keys), Set(appleClaims.keys), file: file, line: line)
        for (key, value) in ourClaims where key != "nonce" && key != "iat" {
            XCTAssertEqual(value, appleClaims[key], key, file: file, line: line)
        }
        let nonce = try XCTUnwrap(ourClaims["nonce"]?.stringValue, file: file, line: line)
        XCTAssertNotNil(UUID(uuidString: nonce), file: file, line: line)
        guard case .int(let iat)? = ourClaims["iat"], case .int(let appleIat)? = appleClaims["iat"] else {
            return XCTFail("iat must be an integer", file: file, line: line)
        }
        XCTAssertLessThan(abs(iat - appleIat), 120, file: file, line: line)
    }
}

/// The `openssl` command line tool, as an independent verifier of what the gateway signs.
enum OpenSSLTool {
    static func verify(signatureDER: Data, over message: Data, key: ECPrivateKey, in directory: URL) throws {
        let id = UUID().uuidString
        let pub = directory.appendingPathComponent("\(id).pub.pem")
        let sig = directory.appendingPathComponent("\(id).sig")
        let msg = directory.appendingPathComponent("\(id).msg")
        let pkcs8 = directory.appendingPathComponent("\(id).p8")
        try Data(key.pkcs8PEM.utf8).write(to: pkcs8)
        defer { try? FileManager.default.removeItem(at: pkcs8) }
        let (exported, text) = try run("/usr/bin/openssl", ["pkey", "-in", pkcs8.path, "-pubout", "-out", pub.path])
        guard exported == 0 else { throw VerificationError(.invalidConfiguration, "openssl pkey: \(text)") }
        try signatureDER.write(to: sig)
        try message.write(to: msg)
        let (status, output) = try run("/usr/bin/openssl", ["dgst", "-sha256", "-verify", pub.path, "-signature", sig.path, msg.path])
        guard status == 0, output.contains("Verified OK") else {
            throw VerificationError(.invalidSignature, "openssl: \(output)")
        }
    }

    /// A compact ES256 JWS: its r||s signature, as DER, over `header.payload`.
    static func verifyJWS(_ jws: String, key: ECPrivateKey) throws {
        let segments = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard segments.count == 3 else { throw VerificationError(.malformedJWS, "segments") }
        let raw = try Base64URL.decode(segments[2])
        guard raw.count == 64 else { throw VerificationError(.invalidSignature, "r||s is \(raw.count) bytes") }
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var value = Array(bytes.drop { $0 == 0 })
            if value.first.map({ $0 & 0x80 != 0 }) ?? true { value.insert(0, at: 0) }
            return [0x02, UInt8(value.count)] + value
        }
        let body = integer(raw[0..<32]) + integer(raw[32..<64])
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jws-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try verify(signatureDER: Data([0x30, UInt8(body.count)] + body), over: Data("\(segments[0]).\(segments[1])".utf8),
                   key: key, in: directory)
    }

    static func run(_ executable: String, _ arguments: [String], input: Data? = nil) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        let stdin = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = stdin
        try process.run()
        if let input { stdin.fileHandleForWriting.write(input) }
        try stdin.fileHandleForWriting.close()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }
}

/// Apple's Python library's offer signature creators (Scripts/apple-offer-signatures.py; PyPI
/// app-store-server-library, outside the product). Skips the test where it is not installed.
enum AppleCreators {
    static func sign(_ request: [String: JSONValue]) throws -> String {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Scripts/apple-offer-signatures.py")
        let python = ProcessInfo.processInfo.environment["IAPGW_PYTHON"] ?? "/usr/bin/env"
        let arguments = python == "/usr/bin/env" ? ["python3", script.path] : [script.path]
        let (status, output) = try OpenSSLTool.run(python, arguments, input: Data(JSONValue.object(request).jsonText.utf8))
        if status == 3 { throw XCTSkip("Apple's Python library is not installed (pip install app-store-server-library): \(output)") }
        guard status == 0, let line = output.split(separator: "\n").last,
              let signature = (try StrictJSON().parse(Array(line.utf8)))["signature"]?.stringValue else {
            throw VerificationError(.internalError, "apple-offer-signatures.py: \(output)")
        }
        return signature
    }
}
