import Adapters
import AppleTrust
import Foundation
import Gateway
import HTTPServer
import IAPConfig
import IAPCore
import IAPGatewayClient
import UpstreamHTTP
import XCTest

/// The plugin seam in production: a third adapter (`VoucherAdapter`, this folder) registered the way
/// the built-in ones are (one more element beside `GatewayAssembly.productionAdapters`), routed by its
/// id from an app file on disk, and driven over real HTTP through the gateway `GatewayAssembly.open`
/// and `start` build from that configuration: body members, policy, purchase checks, claim,
/// entitlements and OpenAPI follow from its declared form with no edit to the gateway.
final class ThirdAdapterTests: XCTestCase {
    private let bundleId = "com.example.voucher"
    private let apiKey = "voucher-app-backend-key"
    private let issuerKey = Array("the voucher issuer's test key".utf8)
    private static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    private var directory: URL!

    override func setUp() async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapgw-voucher-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("apps"), withIntermediateDirectories: true)
    }

    override func tearDown() async throws { try? FileManager.default.removeItem(at: directory) }

    /// The gateway's adapters: production's, and the voucher adapter's factory (the one registration line).
    private var adapters: [any AdapterFactory] { GatewayAssembly.productionAdapters + [VoucherAdapter.Factory(key: issuerKey)] }

    /// The configuration folder: a gateway file whose upstreams are a closed loopback port (nothing
    /// here may reach Apple) and the voucher app's policy, its voucher evidence routed by adapter id.
    private func writeConfiguration(voucherRouting: String = "voucher") throws {
        let gateway = """
            <?xml version="1.0" encoding="UTF-8"?>
            <gateway>
                <listenAddress>127.0.0.1</listenAddress>
                <listenPort type="integer">0</listenPort>
                <storageURL>sqlite:\(directory.appendingPathComponent("gateway.sqlite").path)</storageURL>
                <upstream>
                    <verifyReceiptProduction>http://127.0.0.1:1/verifyReceipt</verifyReceiptProduction>
                    <verifyReceiptSandbox>http://127.0.0.1:1/verifyReceipt</verifyReceiptSandbox>
                    <serverAPIProduction>http://127.0.0.1:1</serverAPIProduction>
                    <serverAPISandbox>http://127.0.0.1:1</serverAPISandbox>
                </upstream>
                <appsDirectory>apps</appsDirectory>
            </gateway>
            """
        let app = """
            <?xml version="1.0" encoding="UTF-8"?>
            <app bundleId="\(bundleId)">
                <appAppleId type="integer">42</appAppleId>
                <allowedEnvironments type="array"><item>Production</item></allowedEnvironments>
                <trustRoots><jws type="array"></jws><receipts type="array"></receipts></trustRoots>
                <serverAPI>
                    <issuerId>57246542-96fe-1a63-e053-0824d011072a</issuerId><keyId>VOUCHERKEY</keyId>
                    <privateKey><env>IAPGW_VOUCHER_TEST_UNSET_KEY</env></privateKey>
                </serverAPI>
                <productCatalog type="array">
                    <item><productId>com.example.voucher.pro</productId><type>Non-Consumable</type></item>
                </productCatalog>
                <routing>
                    <receipt>legacy</receipt>
                    <transactionId>serverAPI</transactionId>
                    <signedTransaction>serverAPI</signedTransaction>
                    <voucher>\(voucherRouting)</voucher>
                </routing>
                <noncePolicy>
                    <requiredForReceipts type="bool">true</requiredForReceipts>
                    <ttlSeconds type="integer">300</ttlSeconds>
                </noncePolicy>
                <familySharingPolicy>deny</familySharingPolicy>
                <gracePeriodPolicy>
                    <grantDuringGracePeriod type="bool">true</grantDuringGracePeriod>
                    <grantDuringBillingRetry type="bool">false</grantDuringBillingRetry>
                </gracePeriodPolicy>
                <onlineChecks type="bool">false</onlineChecks>
                <localOnlyJWS type="bool">false</localOnlyJWS>
                <apiKey><sha256>\(SHA256Digest.lowercaseHex(Array(apiKey.utf8)))</sha256></apiKey>
            </app>
            """
        try gateway.write(to: directory.appendingPathComponent("gateway.xml"), atomically: true, encoding: .utf8)
        try app.write(to: directory.appendingPathComponent("apps/\(bundleId).xml"), atomically: true, encoding: .utf8)
    }

    private func open(adapters: [any AdapterFactory]) async throws(VerificationError) -> (GatewayAssembly, GatewayParts) {
        try await GatewayAssembly.open(configDirectory: directory, mappingsDirectory: Self.packageRoot.appendingPathComponent("Mappings"),
                                       environment: [:], logger: .disabled, adapters: adapters)
    }

    /// The gateway built from the configuration folder, serving on loopback until the test ends.
    private func serve() async throws -> LoopbackGateway {
        try writeConfiguration()
        let (assembly, parts) = try await open(adapters: adapters)
        let (service, server, background) = try await assembly.start(parts)
        addTeardownBlock {
            await server.shutdown(gracePeriod: .seconds(2))
            await service.finishShadowWork()
            background.cancel()
            _ = await background.value
        }
        let client = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(connectTimeout: .seconds(5),
                                                                                     requestTimeout: .seconds(20)))
        return LoopbackGateway(url: "http://127.0.0.1:\(server.port)", client: client, apiKey: apiKey)
    }

    private struct LoopbackGateway {
        let url: String
        let client: UpstreamHTTPClient
        let apiKey: String

        func send(_ method: String, _ path: String, _ body: String? = nil) async throws -> (status: Int, json: JSONValue) {
            var headers = [("Authorization", "Bearer \(apiKey)")]
            if body != nil { headers.append(("Content-Type", "application/json")) }
            let response = try await client.send(UpstreamRequest(method: method, url: url + path, headers: headers,
                                                                 body: body.map { Array($0.utf8) }))
            return (response.status, try StrictJSON().parse(response.body))
        }
    }

    private func voucher(bundleId: String? = nil, transactionId: String = "v-1001") -> String {
        VoucherAdapter.issue(bundleId: bundleId ?? self.bundleId, productId: "com.example.voucher.pro",
                             transactionId: transactionId, purchaseMs: 1_700_000_000_000, key: issuerKey)
    }

    private func code(_ json: JSONValue) -> String? { json["error"]?["code"]?.stringValue }

    func testAVoucherIsVerifiedClaimedAndAnsweredOverHTTP() async throws {
        let gw = try await serve()
        let verify = "/v1/apps/\(bundleId)/verify"
        let first = try await gw.send("POST", verify, #"{"account":"alice","voucher":"\#(voucher())"}"#)
        XCTAssertEqual(first.status, 200, first.json.jsonText)
        XCTAssertEqual(first.json["adapter"], .string("voucher"))
        XCTAssertEqual(first.json["verdict"], .string("granted"))
        XCTAssertEqual(first.json["newlyGranted"], .array([.string("v-1001")]))

        let again = try await gw.send("POST", verify, #"{"account":"alice","voucher":"\#(voucher())"}"#)
        XCTAssertEqual(again.status, 200, again.json.jsonText)
        XCTAssertEqual(again.json["alreadyGranted"], .array([.string("v-1001")]))

        // The ledger binds the chain to its first account, whichever adapter verified it.
        let other = try await gw.send("POST", verify, #"{"account":"mallory","voucher":"\#(voucher())"}"#)
        XCTAssertEqual(other.status, 409, other.json.jsonText)
        XCTAssertEqual(code(other.json), "TRANSACTION_BOUND_TO_OTHER_ACCOUNT")

        let entitlements = try await gw.send("GET", "/v1/apps/\(bundleId)/accounts/alice/entitlements")
        XCTAssertEqual(entitlements.status, 200)
        XCTAssertTrue(entitlements.json.jsonText.contains(#""productId":"com.example.voucher.pro""#), entitlements.json.jsonText)
    }

    func testTheClientLibrarySendsTheThirdKindAndReadsAnAdapterIdItDoesNotKnow() async throws {
        let gw = try await serve()
        let client = try IAPGatewayClient(baseURL: try XCTUnwrap(URL(string: gw.url)), bundleId: bundleId, apiKey: apiKey,
                                          timeout: .seconds(20))
        let answer = try await client.verify(account: "carol", evidence: IAPGatewayEvidence(member: "voucher",
                                                                                          value: voucher(transactionId: "v-2002")))
        XCTAssertEqual(answer.verdict, .granted)
        XCTAssertEqual(answer.adapter, IAPGatewayAdapter(rawValue: "voucher"))
        XCTAssertEqual(answer.newlyGranted, ["v-2002"])
        do {
            _ = try await client.verify(account: "carol", evidence: IAPGatewayEvidence(member: "voucher", value: voucher(bundleId: "com.other")))
            XCTFail("another app's voucher must be refused")
        } catch {
            XCTAssertEqual(error.code, "BUNDLE_ID_MISMATCH")
        }
    }

    func testTheGatewaysPolicyAndBodyRulesApplyToTheThirdAdapter() async throws {
        let gw = try await serve()
        let verify = "/v1/apps/\(bundleId)/verify"
        var tampered = voucher()
        tampered.removeLast()
        tampered += tampered.hasSuffix("0") ? "1" : "0"
        let forged = try await gw.send("POST", verify, #"{"account":"alice","voucher":"\#(tampered)"}"#)
        XCTAssertEqual(forged.status, 422)
        XCTAssertEqual(code(forged.json), "INVALID_SIGNATURE")

        let otherApp = try await gw.send("POST", verify, #"{"account":"alice","voucher":"\#(voucher(bundleId: "com.other"))"}"#)
        XCTAssertEqual(code(otherApp.json), "BUNDLE_ID_MISMATCH", "AppIdentity.check, through the adapter's EvidencePolicy")

        // Members follow the registered forms: a nonce goes with a receipt only, two kinds at once never.
        let withNonce = try await gw.send("POST", verify, #"{"account":"alice","voucher":"\#(voucher())","nonce":"n"}"#)
        XCTAssertEqual(withNonce.status, 400)
        XCTAssertEqual(code(withNonce.json), "MALFORMED_REQUEST")
        let twoKinds = try await gw.send("POST", verify, #"{"account":"alice","voucher":"\#(voucher())","receipt":"AAAA"}"#)
        XCTAssertEqual(code(twoKinds.json), "MALFORMED_REQUEST")
        let unknown = try await gw.send("POST", verify, #"{"account":"alice","coupon":"1"}"#)
        XCTAssertEqual(code(unknown.json), "MALFORMED_REQUEST", "no registered adapter reads coupon")

        // The receipt's own step (its nonce) still runs for receipts, before any adapter is asked.
        let noNonce = try await gw.send("POST", verify, #"{"account":"alice","receipt":"AAAA"}"#)
        XCTAssertEqual(code(noNonce.json), "NONCE_REQUIRED")
    }

    func testTheOpenAPIDocumentListsTheThirdAdaptersMember() async throws {
        let document = try await serve().send("GET", "/openapi.json")
        guard case .array(let forms)? = document.json["components"]?["schemas"]?["VerifyRequest"]?["oneOf"] else {
            return XCTFail(document.json.jsonText)
        }
        // One body shape per evidence form, each with only its own members.
        let shapes = Set(forms.compactMap { $0["properties"]?.objectValue.map { Set($0.keys) } })
        XCTAssertTrue(shapes.contains(["account", "voucher"]), "\(shapes)")
        XCTAssertTrue(shapes.contains(["account", "receipt", "nonce"]), "\(shapes)")
        XCTAssertTrue(forms.allSatisfy { $0["additionalProperties"] == .bool(false) })
    }

    func testAnAppFileRoutingToAnUnknownAdapterIsAConfigurationErrorNamingTheKnownOnes() async throws {
        try writeConfiguration(voucherRouting: "vouchr")
        do {
            _ = try await open(adapters: adapters)
            XCTFail("a routing entry naming no registered adapter must stop the start")
        } catch {
            XCTAssertEqual(error.code, .invalidConfiguration)
            XCTAssertTrue(error.message.contains("routing.voucher: \"vouchr\" is neither a routing preset"), error.message)
            XCTAssertTrue(error.message.contains("nor a known adapter (serverAPI, verifyReceipt, voucher)"), error.message)
        }
        // Without its factory the gateway knows no voucher evidence: the routing entry is a typo to it.
        try writeConfiguration()
        do {
            _ = try await open(adapters: GatewayAssembly.productionAdapters)
            XCTFail("routing a kind no registered adapter verifies must stop the start")
        } catch {
            XCTAssertTrue(error.message.hasSuffix("routing.voucher: unknown key"), error.message)
        }
    }

    /// What adding this adapter touched outside its folder: no file in the package names it, and the
    /// only file outside `Sources/Adapters/` naming a concrete adapter is the production list of
    /// factories, to which a production adapter adds its one element.
    func testTheThirdAdapterTouchesNothingOutsideItsFolder() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().standardizedFileURL.path + "/"
        var namingVoucher: [String] = [], namingConcreteAdapters: [String] = []
        for top in ["Sources", "Tests", "Fuzz"] {
            let base = Self.packageRoot.appendingPathComponent(top)
            guard let files = FileManager.default.enumerator(atPath: base.path) else { continue }
            for case let relative as String in files where relative.hasSuffix(".swift") {
                let path = base.appendingPathComponent(relative).standardizedFileURL.path
                let text = try String(contentsOfFile: path, encoding: .utf8)
                let shown = "\(top)/\(relative)"
                if !path.hasPrefix(folder), text.range(of: "voucher", options: .caseInsensitive) != nil { namingVoucher.append(shown) }
                if top == "Sources", !relative.hasPrefix("Adapters/"),
                   text.contains("LegacyReceiptAdapter") || text.contains("ServerAPIAdapter") {
                    namingConcreteAdapters.append(shown)
                }
            }
        }
        XCTAssertEqual(namingVoucher, [], "files outside the adapter's folder that had to learn about it")
        XCTAssertEqual(namingConcreteAdapters, ["Sources/Gateway/GatewayAssembly+Adapters.swift"])
        let registration = try String(contentsOf: Self.packageRoot.appendingPathComponent(namingConcreteAdapters.first ?? ""),
                                      encoding: .utf8)
        XCTAssertEqual(registration.split(separator: "\n").filter { $0.contains("Adapter.Factory()") }.count,
                       GatewayAssembly.productionAdapters.count, "one line per registered adapter")
    }
}
