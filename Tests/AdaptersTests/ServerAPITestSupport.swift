import Foundation
import IAPMapping
import Synchronization
import XCTest
@testable import Adapters
import AppleTrust
import HTTPServer
@testable import IAPConfig
import IAPCore
import TestPKI
import UpstreamHTTP

/// A loopback App Store Server API that answers from a script: responses queued per
/// "METHOD /environment/path", every request recorded, and every bearer token checked against the
/// API key's public key (a token that does not verify gets Apple's 401, as the real API does).
final class ScriptedAppStoreServer: Sendable {
    private struct State {
        var queues: [String: [HTTPResponse]] = [:]
        var requests: [HTTPRequest] = []
    }

    private let state = LockedBox(State())
    private let server: HTTPServer
    let apiPublicKey: ECPublicKey

    init(apiPublicKey: ECPublicKey) throws {
        self.apiPublicKey = apiPublicKey
        let state = self.state
        let key = apiPublicKey
        server = try HTTPServer(configuration: HTTPServerConfiguration(port: 0)) { request in
            let response: HTTPResponse? = state.withLock { s in
                s.requests.append(request)
                guard Self.tokenVerifies(request.headers["Authorization"], key: key) else {
                    return HTTPResponse(status: 401)
                }
                let routeKey = request.method + " " + request.path
                guard var queue = s.queues[routeKey], !queue.isEmpty else { return nil }
                let next = queue.removeFirst()
                // The last scripted answer repeats, so "always 503" needs one entry.
                s.queues[routeKey] = queue.isEmpty ? [next] : queue
                return next
            }
            return response ?? .json(418, #"{"unscripted":"\#(request.method) \#(request.path)"}"#)
        }
        try server.start()
    }

    var productionURL: String { "http://127.0.0.1:\(server.port)/production" }
    var sandboxURL: String { "http://127.0.0.1:\(server.port)/sandbox" }
    var baseURLs: EnvironmentURLs { .init(production: productionURL, sandbox: sandboxURL) }

    func script(_ method: String, _ environment: ServerAPIEnvironment, _ path: String, _ responses: HTTPResponse...) {
        let key = method + " /" + environment.rawValue.lowercased() + path
        state.withLock { $0.queues[key, default: []] += responses }
    }

    var requests: [HTTPRequest] { state.withLock { $0.requests } }

    func requests(to path: String) -> [HTTPRequest] { requests.filter { $0.path.hasSuffix(path) } }

    func stop() async { await server.shutdown(gracePeriod: .seconds(1)) }

    static func tokenVerifies(_ authorization: String?, key: ECPublicKey) -> Bool {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return false }
        let parts = authorization.dropFirst(7).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let signature = try? Base64URL.decode(String(parts[2])) else { return false }
        return key.verifyES256(signature: signature, message: Array((parts[0] + "." + parts[1]).utf8))
    }

    static func appleError(_ status: Int, _ code: Int64, retryAfter: Int? = nil) -> HTTPResponse {
        var response = HTTPResponse.json(status, #"{"errorCode":\#(code),"errorMessage":"scripted \#(code)"}"#)
        if let retryAfter { response.headers.append(("Retry-After", String(retryAfter))) }
        return response
    }

    static func ok(_ object: [String: JSONValue]) -> HTTPResponse { .json(200, JSONValue.object(object).jsonText) }
}

/// Everything a Server API test needs: a test PKI standing in for Apple, an API key, an app policy
/// pinned to the test root, and the adapter and scripted server wired together.
final class ServerAPIFixture {
    static let bundleId = "com.example.serverapi"
    static let keyId = "KEYID12345"
    static let issuerId = "57246542-96fe-1a63-e053-0824d011072a"

    let ca: TestPKI.CertificateAuthority
    let signer: TestPKI.JWSSigner
    let apiKey: ECPrivateKey
    let directory: URL
    let keyFile: URL
    let server: ScriptedAppStoreServer
    let sleeps = LockedBox<[Duration]>([])
    let logLines = LockedBox<[String]>([])

    init() throws {
        ca = try TestPKI.CertificateAuthority.make()
        signer = ca.signer(leaf: try ca.issueLeaf())
        apiKey = try ECPrivateKey.generate(.p256)
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("serverapi-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try ca.root.der.write(to: directory.appendingPathComponent("root.der"))
        keyFile = directory.appendingPathComponent("AuthKey.p8")
        try Data(apiKey.pkcs8PEM.utf8).write(to: keyFile)
        server = try ScriptedAppStoreServer(apiPublicKey: apiKey.publicKey)
    }

    func tearDown() async {
        await server.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    func app(environments: Set<AppStoreEnvironment> = [.production], sandboxAccounts: Set<String> = [],
             localOnlyJWS: Bool = false, bundleId: String = ServerAPIFixture.bundleId,
             receiptRoots: [URL]? = nil, serverAPI: AppPolicy.InAppPurchaseKey?? = nil) -> AppPolicy {
        let credentials = serverAPI ?? AppPolicy.InAppPurchaseKey(
            issuerId: Self.issuerId, keyId: Self.keyId, privateKey: SecretReference(.file(keyFile)))
        return AppPolicy(
            bundleId: bundleId, appAppleId: nil, allowedEnvironments: environments, sandboxAccounts: sandboxAccounts,
            trustRoots: .init(jws: [directory.appendingPathComponent("root.der")],
                              receipts: receiptRoots ?? [directory.appendingPathComponent("root.der")]),
            serverAPI: credentials, productCatalog: [:],
            routing: .init(receipt: .serverAPI, transactionId: .serverAPI, signedTransaction: .serverAPI),
            noncePolicy: .init(requiredForReceipts: false, ttlSeconds: 300), familySharingPolicy: .allow,
            gracePeriodPolicy: .init(grantDuringGracePeriod: true, grantDuringBillingRetry: false),
            onlineChecks: false, localOnlyJWS: localOnlyJWS, apiKey: .sha256(String(repeating: "0", count: 64)))
    }

    var logger: Logger {
        let lines = logLines
        return Logger(minimumLevel: .debug) { line in lines.withLock { $0.append(line) } }
    }

    var retryPolicy: RetryPolicy { RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(100), maxDelay: .seconds(10), jitter: 0, budget: .seconds(30)) }

    var recordingSleep: RetryPolicy.Sleep {
        let sleeps = self.sleeps
        return { duration in sleeps.withLock { $0.append(duration) } }
    }

    func upstream() throws -> UpstreamHTTPClient {
        try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(connectTimeout: .seconds(5), requestTimeout: .seconds(20)))
    }

    func adapter(maxPages: Int = 50) throws -> ServerAPIAdapter {
        let mapping = try MappingFile.load(contentsOf: Self.packageRoot.appendingPathComponent("Mappings/serverAPI/v1.json"))
        var options = ServerAPIAdapter.Options()
        options.retryPolicy = retryPolicy
        options.maxPages = maxPages
        options.secretEnvironment = [:]
        options.sleep = recordingSleep
        return ServerAPIAdapter(upstream: try upstream(), baseURLs: server.baseURLs, normalizer: try ServerAPINormalizer(mapping),
                                options: options, logger: logger)
    }

    func client(tokenProvider: (any ServerAPITokenProviding)? = nil) throws -> AppStoreServerAPIClient {
        let tokens = try tokenProvider ?? AppStoreServerAPIToken(privateKeyPEM: apiKey.pkcs8PEM, keyId: Self.keyId,
                                                                  issuerId: Self.issuerId, bundleId: Self.bundleId)
        return AppStoreServerAPIClient(baseURLs: server.baseURLs, tokenProvider: tokens, upstream: try upstream(),
                                       retryPolicy: retryPolicy, logger: logger, sleep: recordingSleep)
    }

    static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    static var nowMs: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// A transaction payload as Apple signs it.
    static func transaction(_ id: String, original: String? = nil, productId: String = "com.example.pro",
                            type: String = "Non-Consumable", environment: String = "Production",
                            bundleId: String = ServerAPIFixture.bundleId, revocationDate: Int64? = nil,
                            purchaseDate: Int64? = nil) -> JSONValue {
        let now = nowMs
        var o: [String: JSONValue] = [
            "transactionId": .string(id), "originalTransactionId": .string(original ?? id), "bundleId": .string(bundleId),
            "productId": .string(productId), "purchaseDate": .int(purchaseDate ?? now - 60_000),
            "originalPurchaseDate": .int(now - 60_000), "quantity": .int(1), "type": .string(type),
            "inAppOwnershipType": .string("PURCHASED"), "signedDate": .int(now - 1000), "environment": .string(environment),
            "transactionReason": .string("PURCHASE"), "storefront": .string("USA"), "storefrontId": .string("143441"),
            "price": .int(9990), "currency": .string("USD"),
        ]
        if type == "Auto-Renewable Subscription" {
            o["expiresDate"] = .int(now + 86_400_000)
            o["subscriptionGroupIdentifier"] = .string("21000000")
            o["webOrderLineItemId"] = .string("9" + id)
        }
        if let revocationDate {
            o["revocationDate"] = .int(revocationDate)
            o["revocationReason"] = .int(1)
        }
        return .object(o)
    }

    static func renewal(original: String, productId: String = "com.example.pro", environment: String = "Production") -> JSONValue {
        .object([
            "originalTransactionId": .string(original), "autoRenewProductId": .string(productId),
            "productId": .string(productId), "autoRenewStatus": .int(1), "signedDate": .int(nowMs - 1000),
            "environment": .string(environment), "recentSubscriptionStartDate": .int(nowMs - 60_000),
            "renewalDate": .int(nowMs + 86_400_000),
        ])
    }

    func sign(_ payload: JSONValue) throws -> String { try signer.sign(payload) }
}

/// Runs an operation that must fail, returning its error.
func expectVerificationError<T>(_ operation: () async throws(VerificationError) -> T,
                                file: StaticString = #filePath, line: UInt = #line) async -> VerificationError? {
    do {
        _ = try await operation()
        XCTFail("expected a VerificationError", file: file, line: line)
        return nil
    } catch {
        return error
    }
}

/// A Mutex that closures can share (Mutex itself cannot be copied into them).
final class LockedBox<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<R>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
}
