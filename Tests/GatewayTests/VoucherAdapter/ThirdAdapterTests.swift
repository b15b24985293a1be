import Adapters
import AppleTrust
import Foundation
import Gateway
import HTTPServer
@testable import IAPConfig
import IAPCore
import IAPMapping
import Ledger
import UpstreamHTTP
import XCTest

/// The plugin seam, proved: a third adapter (`VoucherAdapter`, this folder) registered with one
/// line beside the built-in verifyReceipt adapter, and driven end to end through the gateway's
/// own handler: body members, policy, purchase checks, claim, entitlements and OpenAPI follow
/// from its declared form with no edit to the gateway.
final class ThirdAdapterTests: XCTestCase {
    private let bundleId = "com.example.voucher"
    private let apiKey = "voucher-app-backend-key"
    private let issuerKey = Array("the voucher issuer's test key".utf8)
    private var directory: URL!

    override func setUp() async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapgw-voucher-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDown() async throws { try? FileManager.default.removeItem(at: directory) }

    private func app() -> AppPolicy {
        AppPolicy(bundleId: bundleId, appAppleId: 42, allowedEnvironments: [.production], trustRoots: .init(jws: [], receipts: []),
                  productCatalog: ["com.example.voucher.pro": .init(productId: "com.example.voucher.pro", type: .nonConsumable)],
                  routing: .init(receipt: .legacy, transactionId: .serverAPI, signedTransaction: .serverAPI),
                  noncePolicy: .init(requiredForReceipts: true, ttlSeconds: 300), familySharingPolicy: .deny,
                  gracePeriodPolicy: .init(grantDuringGracePeriod: true, grantDuringBillingRetry: false),
                  onlineChecks: false, localOnlyJWS: false,
                  apiKey: .sha256(SHA256Digest.lowercaseHex(Array(apiKey.utf8))))
    }

    private func service() throws -> GatewayService {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let legacyMapping = try MappingFile.load(contentsOf: root.appendingPathComponent("Mappings/verifyReceipt/v1.json"))
        let upstream = try UpstreamHTTPClient(configuration: .init(connectTimeout: .seconds(1), requestTimeout: .seconds(1)))
        var adapters = AdapterRegistry([
            try LegacyReceiptAdapter(upstream: upstream, endpoints: EnvironmentURLs(production: "http://127.0.0.1:1/",
                                                                                          sandbox: "http://127.0.0.1:1/"),
                                     mapping: legacyMapping),
        ])
        adapters.register(VoucherAdapter(key: issuerKey))  // the one registration line
        let ledger = try AsyncSQLLedger(storage: directory.appendingPathComponent("gateway.sqlite").path)
        return GatewayService(GatewayParts(apps: [bundleId: app()], adapters: adapters, ledger: ledger))
    }

    private func send(_ service: GatewayService, _ method: String, _ path: String, _ body: String? = nil) async throws
        -> (status: Int, json: JSONValue) {
        var headers: HTTPHeaders = ["Authorization": "Bearer \(apiKey)"]
        if body != nil { headers = ["Authorization": "Bearer \(apiKey)", "Content-Type": "application/json"] }
        let response = await service.handle(HTTPRequest(method: method, path: path, headers: headers,
                                                        body: Array((body ?? "").utf8)))
        return (response.status, try StrictJSON().parse(response.body))
    }

    private func voucher(bundleId: String? = nil, transactionId: String = "v-1001") -> String {
        VoucherAdapter.issue(bundleId: bundleId ?? self.bundleId, productId: "com.example.voucher.pro",
                             transactionId: transactionId, purchaseMs: 1_700_000_000_000, key: issuerKey)
    }

    private func code(_ json: JSONValue) -> String? {
        if case .object(let o) = json, case .object(let e)? = o["error"], case .string(let c)? = e["code"] { return c }
        return nil
    }

    func testAVoucherIsVerifiedClaimedAndAnsweredThroughTheGatewaysHandler() async throws {
        let gw = try service()
        let verify = "/v1/apps/\(bundleId)/verify"
        let first = try await send(gw, "POST", verify, #"{"account":"alice","voucher":"\#(voucher())"}"#)
        XCTAssertEqual(first.status, 200, first.json.jsonText)
        guard case .object(let answer) = first.json else { return XCTFail(first.json.jsonText) }
        XCTAssertEqual(answer["adapter"], .string("voucher"))
        XCTAssertEqual(answer["verdict"], .string("granted"))
        XCTAssertEqual(answer["newlyGranted"], .array([.string("v-1001")]))

        let again = try await send(gw, "POST", verify, #"{"account":"alice","voucher":"\#(voucher())"}"#)
        XCTAssertEqual(again.status, 200, again.json.jsonText)
        if case .object(let o) = again.json { XCTAssertEqual(o["alreadyGranted"], .array([.string("v-1001")])) }

        // The ledger binds the chain to its first account, whichever adapter verified it.
        let other = try await send(gw, "POST", verify, #"{"account":"mallory","voucher":"\#(voucher())"}"#)
        XCTAssertEqual(other.status, 409, other.json.jsonText)
        XCTAssertEqual(code(other.json), "TRANSACTION_BOUND_TO_OTHER_ACCOUNT")

        let entitlements = try await send(gw, "GET", "/v1/apps/\(bundleId)/accounts/alice/entitlements")
        XCTAssertEqual(entitlements.status, 200)
        XCTAssertTrue(entitlements.json.jsonText.contains(#""productId":"com.example.voucher.pro""#), entitlements.json.jsonText)
    }

    func testTheGatewaysPolicyAndBodyRulesApplyToTheThirdAdapter() async throws {
        let gw = try service()
        let verify = "/v1/apps/\(bundleId)/verify"
        var tampered = voucher()
        tampered.removeLast()
        tampered += tampered.hasSuffix("0") ? "1" : "0"
        let forged = try await send(gw, "POST", verify, #"{"account":"alice","voucher":"\#(tampered)"}"#)
        XCTAssertEqual(forged.status, 422)
        XCTAssertEqual(code(forged.json), "INVALID_SIGNATURE")

        let otherApp = try await send(gw, "POST", verify, #"{"account":"alice","voucher":"\#(voucher(bundleId: "com.other"))"}"#)
        XCTAssertEqual(code(otherApp.json), "BUNDLE_ID_MISMATCH", "AppIdentity.check, through the adapter's EvidencePolicy")

        // Members follow the registered forms: a nonce goes with a receipt only, two kinds at once never.
        let withNonce = try await send(gw, "POST", verify, #"{"account":"alice","voucher":"\#(voucher())","nonce":"n"}"#)
        XCTAssertEqual(withNonce.status, 400)
        XCTAssertEqual(code(withNonce.json), "MALFORMED_REQUEST")
        let twoKinds = try await send(gw, "POST", verify, #"{"account":"alice","voucher":"\#(voucher())","receipt":"AAAA"}"#)
        XCTAssertEqual(code(twoKinds.json), "MALFORMED_REQUEST")
        let unknown = try await send(gw, "POST", verify, #"{"account":"alice","transactionId":"1"}"#)
        XCTAssertEqual(code(unknown.json), "MALFORMED_REQUEST", "no registered adapter reads transactionId here")

        // The receipt's own step (its nonce) still runs for receipts, before any adapter is asked.
        let noNonce = try await send(gw, "POST", verify, #"{"account":"alice","receipt":"AAAA"}"#)
        XCTAssertEqual(code(noNonce.json), "NONCE_REQUIRED")
    }

    func testTheOpenAPIDocumentListsTheThirdAdaptersMember() async throws {
        let document = try await send(try service(), "GET", "/openapi.json")
        guard case .object(let root) = document.json, case .object(let components)? = root["components"],
              case .object(let schemas)? = components["schemas"], case .object(let request)? = schemas["VerifyRequest"],
              case .array(let forms)? = request["oneOf"] else { return XCTFail(document.json.jsonText) }
        // One body shape per evidence form, each with only its own members.
        let shapes = forms.compactMap { $0["properties"]?.objectValue.map { Set($0.keys) } }
        XCTAssertEqual(Set(shapes), [["account", "receipt", "nonce"], ["account", "voucher"]])
        XCTAssertTrue(forms.allSatisfy { $0["additionalProperties"] == .bool(false) })
    }
}
