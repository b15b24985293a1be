import AppStoreSimulator
import AppleTrust
import Demo
import Foundation
import HTTPServer
import IAPConfig
import IAPCore
import Synchronization
import UpstreamHTTP
import XCTest

/// One gateway answer as a client sees it over the wire.
public struct GatewayAnswer: Sendable {
    public let status: Int
    /// Lowercased names (as UpstreamHTTP reports them).
    public let headers: [String: String]
    public let body: [UInt8]

    public init(status: Int, headers: [String: String], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public var text: String { String(decoding: body, as: UTF8.self) }
    public var json: JSONValue { (try? StrictJSON().parse(body)) ?? .null }
    public var errorCode: String? { json["error"]?["code"]?.stringValue }
}

/// Every log line a gateway wrote, for the no-secrets-in-logs checks.
public final class LogCapture: Sendable {
    private let lines = Mutex<[String]>([])
    public init() {}
    public var logger: Logger { Logger(minimumLevel: .debug) { [self] line in lines.withLock { $0.append(line) } } }
    public var captured: [String] { lines.withLock { $0 } }
}

/// A running demo deployment (simulator + gateway on loopback, configured through real files in
/// its own temporary directory) and a real HTTP client pointed at it.
public struct GatewayE2E: Sendable {
    public let harness: DemoHarness
    public let client: UpstreamHTTPClient

    public var simulator: AppStoreSimulator { harness.simulator }
    public var bundleId: String { harness.bundleId }
    public var appURL: String { "\(harness.gatewayURL)/v1/apps/\(harness.bundleId)" }
    public var sqlitePath: String { harness.directory.appendingPathComponent("iapgw.sqlite").path }

    /// Starts a deployment torn down (server stopped, directory removed) when `test` ends.
    public static func start(_ test: XCTestCase, configure: (inout DemoHarness.Options) -> Void = { _ in },
                      logger: Logger = .disabled) async throws -> GatewayE2E {
        var options = DemoHarness.Options()
        configure(&options)
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("iapgw-e2e-\(UUID().uuidString)", isDirectory: true)
        let harness = try await DemoHarness.start(directory: directory, options: options, logger: logger)
        test.addTeardownBlock {
            await harness.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        let client = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(
            connectTimeout: .seconds(5), requestTimeout: .seconds(20), maxConnectionsPerHost: 64))
        return GatewayE2E(harness: harness, client: client)
    }

    // MARK: HTTP

    /// `headers`: sent beside the key and content type (an `Idempotency-Key`, say).
    public func send(_ method: String, _ url: String, body: [UInt8]? = nil, apiKey: String?? = .none,
              contentType: String? = "application/json", headers extra: [(String, String)] = []) async throws -> GatewayAnswer {
        let headers = requestHeaders(hasBody: body != nil, apiKey: apiKey, contentType: contentType) + extra
        let response = try await client.send(UpstreamRequest(method: method, url: url, headers: headers, body: body))
        return GatewayAnswer(status: response.status, headers: response.headers, body: response.body)
    }

    /// The same request answered in process by the gateway's handler (`GatewayService.handle`):
    /// no client socket and no HTTP parsing, for what the handler decides (routing, auth, bodies,
    /// refusals) where the wire adds nothing. `path` is the request target's path, `query` its query.
    public func handle(_ method: String, _ path: String, query: [String: String] = [:], body: [UInt8]? = nil,
                       apiKey: String?? = .none, contentType: String? = "application/json") async -> GatewayAnswer {
        var headers = HTTPHeaders()
        for (name, value) in requestHeaders(hasBody: body != nil, apiKey: apiKey, contentType: contentType) {
            headers.add(name: name, value: value)
        }
        let response = await harness.service.handle(HTTPRequest(method: method, path: path, query: query, headers: headers,
                                                                body: body ?? []))
        var answerHeaders: [String: String] = [:]
        for (name, value) in response.headers { answerHeaders[name.lowercased()] = value }
        return GatewayAnswer(status: response.status, headers: answerHeaders, body: response.body)
    }

    /// `apiKey`: `.none` sends the app's key, `.some(nil)` none, `.some(key)` that one.
    private func requestHeaders(hasBody: Bool, apiKey: String??, contentType: String?) -> [(String, String)] {
        var headers: [(String, String)] = []
        let key: String? = switch apiKey { case .none: harness.apiKey; case .some(let explicit): explicit }
        if let key { headers.append(("Authorization", "Bearer \(key)")) }
        if hasBody, let contentType { headers.append(("Content-Type", contentType)) }
        return headers
    }

    public func post(_ route: String, _ object: [String: JSONValue], apiKey: String?? = .none) async throws -> GatewayAnswer {
        try await send("POST", "\(appURL)/\(route)", body: Array(JSONValue.object(object).jsonText.utf8), apiKey: apiKey)
    }

    public func get(_ path: String) async throws -> GatewayAnswer { try await send("GET", harness.gatewayURL + path) }

    public func nonce(for account: String) async throws -> String {
        let answer = try await post("nonces", ["account": .string(account)])
        XCTAssertEqual(answer.status, 200, answer.text)
        return try XCTUnwrap(answer.json["nonce"]?.stringValue)
    }

    /// The old-app flow: a fresh nonce for `account`, then the receipt with it.
    public func verifyReceipt(_ receipt: String, account: String) async throws -> GatewayAnswer {
        let nonce = try await nonce(for: account)
        return try await post("verify", ["account": .string(account), "receipt": .string(receipt), "nonce": .string(nonce)])
    }

    public func verifyTransactionId(_ id: String, account: String) async throws -> GatewayAnswer {
        try await post("verify", ["account": .string(account), "transactionId": .string(id)])
    }

    public func verifySigned(_ jws: String, account: String) async throws -> GatewayAnswer {
        try await post("verify", ["account": .string(account), "signedTransaction": .string(jws)])
    }

    public func entitlements(_ account: String) async throws -> [JSONValue] {
        let answer = try await send("GET", "\(appURL)/accounts/\(account)/entitlements")
        XCTAssertEqual(answer.status, 200, answer.text)
        return answer.json["entitlements"]?.arrayValue ?? []
    }

    // MARK: Purchases in the simulator

    public static let monthly = "com.example.demo.pro.monthly"
    public static let removeAds = "com.example.demo.removeads"

    /// A purchase at the demo catalog's price, so it passes every check unless the test changes something.
    public func buy(_ productId: String = GatewayE2E.monthly, owner: String, environment: AppStoreEnvironment = .production,
             bundleId: String? = nil, price: Int64? = nil) throws -> SimulatedPurchase {
        let subscription = productId == Self.monthly
        return try simulator.purchase(PurchaseRequest(
            bundleId: bundleId ?? harness.bundleId, productId: productId,
            type: subscription ? .autoRenewable : .nonConsumable, owner: owner, environment: environment,
            subscriptionGroupIdentifier: subscription ? "demo.pro" : nil,
            price: price ?? (subscription ? 4_990 : 2_990)))
    }

    /// Rewrites one of the deployment's secret files (`secrets/shared-secret`, …) and waits for the
    /// gateway's secret reader to pick it up, as it would within its refresh delay.
    public func rewriteSecretFile(_ name: String, _ text: String) throws {
        try Data(text.utf8).write(to: harness.directory.appendingPathComponent("secrets/\(name)"))
        XCTAssertTrue(SecretFiles.shared.refreshNow(within: .seconds(10)), "the secret files were not refreshed")
    }

    /// Registers the demo app again in the simulator with another shared secret but the same Server
    /// API key, so only verifyReceipt starts refusing the gateway (21004).
    public func rotateSimulatorSharedSecret(to secret: String) throws {
        let pem = try String(contentsOf: harness.directory.appendingPathComponent("secrets/AuthKey.p8"), encoding: .utf8)
        let key = try ECPrivateKey(pkcs8PEM: pem)
        simulator.registerApp(SimulatedApp(bundleId: harness.bundleId, appAppleId: harness.options.appAppleId,
                                           sharedSecret: secret, issuerId: "57246542-96fe-1a63-e053-0824d011072a",
                                           keyId: "SIMKEY0001", apiPublicKey: key.publicKey))
    }
}
