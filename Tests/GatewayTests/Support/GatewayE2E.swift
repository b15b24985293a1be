import AppStoreSimulator
import AppleTrust
import Demo
import Foundation
import IAPCore
import Synchronization
import UpstreamHTTP
import XCTest

/// One gateway answer as a client sees it over the wire.
struct GatewayAnswer {
    let status: Int
    /// Lowercased names (as UpstreamHTTP reports them).
    let headers: [String: String]
    let body: [UInt8]

    var text: String { String(decoding: body, as: UTF8.self) }
    var json: JSONValue { (try? StrictJSON().parse(body)) ?? .null }
    var errorCode: String? { json["error"]?["code"]?.stringValue }
}

/// Every log line a gateway wrote, for the no-secrets-in-logs checks.
final class LogCapture: Sendable {
    private let lines = Mutex<[String]>([])
    var logger: Logger { Logger(minimumLevel: .debug) { [self] line in lines.withLock { $0.append(line) } } }
    var captured: [String] { lines.withLock { $0 } }
}

/// A running demo deployment (simulator + gateway on loopback, configured through real files in
/// its own temporary directory) and a real HTTP client pointed at it.
struct GatewayE2E {
    let harness: DemoHarness
    let client: UpstreamHTTPClient

    var simulator: AppStoreSimulator { harness.simulator }
    var bundleId: String { harness.bundleId }
    var appURL: String { "\(harness.gatewayURL)/v1/apps/\(harness.bundleId)" }
    var sqlitePath: String { harness.directory.appendingPathComponent("iapgw.sqlite").path }

    /// Starts a deployment torn down (server stopped, directory removed) when `test` ends.
    static func start(_ test: XCTestCase, configure: (inout DemoHarness.Options) -> Void = { _ in },
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

    func send(_ method: String, _ url: String, body: [UInt8]? = nil, apiKey: String?? = .none,
              contentType: String? = "application/json") async throws -> GatewayAnswer {
        var headers: [(String, String)] = []
        let key: String? = switch apiKey { case .none: harness.apiKey; case .some(let explicit): explicit }
        if let key { headers.append(("Authorization", "Bearer \(key)")) }
        if body != nil, let contentType { headers.append(("Content-Type", contentType)) }
        let response = try await client.send(UpstreamRequest(method: method, url: url, headers: headers, body: body))
        return GatewayAnswer(status: response.status, headers: response.headers, body: response.body)
    }

    func post(_ route: String, _ object: [String: JSONValue], apiKey: String?? = .none) async throws -> GatewayAnswer {
        try await send("POST", "\(appURL)/\(route)", body: Array(JSONValue.object(object).jsonText.utf8), apiKey: apiKey)
    }

    func get(_ path: String) async throws -> GatewayAnswer { try await send("GET", harness.gatewayURL + path) }

    func nonce(for account: String) async throws -> String {
        let answer = try await post("nonces", ["account": .string(account)])
        XCTAssertEqual(answer.status, 200, answer.text)
        return try XCTUnwrap(answer.json["nonce"]?.stringValue)
    }

    /// The old-app flow: a fresh nonce for `account`, then the receipt with it.
    func verifyReceipt(_ receipt: String, account: String) async throws -> GatewayAnswer {
        let nonce = try await nonce(for: account)
        return try await post("verify", ["account": .string(account), "receipt": .string(receipt), "nonce": .string(nonce)])
    }

    func verifyTransactionId(_ id: String, account: String) async throws -> GatewayAnswer {
        try await post("verify", ["account": .string(account), "transactionId": .string(id)])
    }

    func verifySigned(_ jws: String, account: String) async throws -> GatewayAnswer {
        try await post("verify", ["account": .string(account), "signedTransaction": .string(jws)])
    }

    func entitlements(_ account: String) async throws -> [JSONValue] {
        let answer = try await send("GET", "\(appURL)/accounts/\(account)/entitlements")
        XCTAssertEqual(answer.status, 200, answer.text)
        return answer.json["entitlements"]?.arrayValue ?? []
    }

    // MARK: Purchases in the simulator

    static let monthly = "com.example.demo.pro.monthly"
    static let removeAds = "com.example.demo.removeads"

    /// A purchase at the demo catalog's price, so it passes every check unless the test changes something.
    func buy(_ productId: String = GatewayE2E.monthly, owner: String, environment: AppStoreEnvironment = .production,
             bundleId: String? = nil, price: Int64? = nil) throws -> SimulatedPurchase {
        let subscription = productId == Self.monthly
        return try simulator.purchase(PurchaseRequest(
            bundleId: bundleId ?? harness.bundleId, productId: productId,
            type: subscription ? .autoRenewable : .nonConsumable, owner: owner, environment: environment,
            subscriptionGroupIdentifier: subscription ? "demo.pro" : nil,
            price: price ?? (subscription ? 4_990 : 2_990)))
    }

    /// Registers the demo app again in the simulator with another shared secret but the same Server
    /// API key, so only verifyReceipt starts refusing the gateway (21004).
    func rotateSimulatorSharedSecret(to secret: String) throws {
        let pem = try String(contentsOf: harness.directory.appendingPathComponent("secrets/AuthKey.p8"), encoding: .utf8)
        let key = try ECPrivateKey(pkcs8PEM: pem)
        simulator.registerApp(SimulatedApp(bundleId: harness.bundleId, appAppleId: harness.options.appAppleId,
                                           sharedSecret: secret, issuerId: "57246542-96fe-1a63-e053-0824d011072a",
                                           keyId: "SIMKEY0001", apiPublicKey: key.publicKey))
    }
}
