import Foundation
import HTTPServer
@testable import IAPConfig
import IAPCore
import IAPMapping
import Synchronization
import UpstreamHTTP
import XCTest
@testable import Adapters

/// A loopback stand-in for Apple's two verifyReceipt hosts: `/production/verifyReceipt` and
/// `/sandbox/verifyReceipt`. A test scripts the answer per call and reads back what was sent.
final class LegacyVerifyReceiptServer: Sendable {
    struct Received: Sendable {
        let environment: String
        let body: [String: JSONValue]
        let rawBody: String
    }

    typealias Responder = @Sendable (_ environment: String, _ body: [String: JSONValue], _ callNumber: Int) -> HTTPResponse

    /// A reference the handler can hold before `self` exists.
    private final class Log: Sendable { let entries = Mutex<[Received]>([]) }
    private let log = Log()
    private let server: HTTPServer

    init(_ responder: @escaping Responder) throws {
        let log = self.log
        server = try HTTPServer(configuration: HTTPServerConfiguration(port: 0, threads: 1)) { request in
            let environment = request.path.split(separator: "/").first.map(String.init) ?? ""
            let json = (try? StrictJSON().parse(request.body))?.objectValue ?? [:]
            let call = log.entries.withLock { list -> Int in
                list.append(Received(environment: environment, body: json, rawBody: String(decoding: request.body, as: UTF8.self)))
                return list.filter { $0.environment == environment }.count
            }
            return responder(environment, json, call)
        }
        try server.start()
    }

    var endpoints: EnvironmentURLs {
        EnvironmentURLs(production: "http://127.0.0.1:\(server.port)/production/verifyReceipt",
                               sandbox: "http://127.0.0.1:\(server.port)/sandbox/verifyReceipt")
    }

    var requests: [Received] { log.entries.withLock { $0 } }
    func calls(_ environment: String) -> Int { requests.filter { $0.environment == environment }.count }

    func stop() async { await server.shutdown(gracePeriod: .seconds(1)) }

    static func json(_ text: String, status: Int = 200, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: Array(text.utf8))
    }

    static func status(_ code: Int, retryable: Bool? = nil) -> HTTPResponse {
        json(#"{"status": \#(code)\#(retryable.map { #", "is-retryable": \#($0)"# } ?? "")}"#)
    }
}

/// Everything a test needs around the adapter: app policy, secrets, captured logs, recorded waits.
enum LegacyFixtures {
    static let bundleId = "com.example.legacy"
    static let appAppleId: Int64 = 1_234_567_890
    static let currentSecret = "current-shared-secret-5f1c9a"
    static let previousSecret = "previous-shared-secret-77d02b"
    static let receipt = Data("a PKCS#7 receipt as the app sent it".utf8).base64EncodedString()
    static let secretVariable = "DEMO_SHARED_SECRET"
    static let previousVariable = "DEMO_SHARED_SECRET_PREVIOUS"

    static func app(environments: Set<AppStoreEnvironment> = [.production], sandboxAccounts: Set<String> = [],
                    withPrevious: Bool = false, secret: SecretReference? = nil) -> AppPolicy {
        let reference = secret ?? SecretReference(.environmentVariable(secretVariable),
                                                  previous: withPrevious ? .environmentVariable(previousVariable) : nil)
        return AppPolicy(bundleId: bundleId, appAppleId: appAppleId, allowedEnvironments: environments,
                         sandboxAccounts: sandboxAccounts, trustRoots: .init(jws: [], receipts: []),
                         sharedSecret: reference, productCatalog: [:],
                         routing: .init(receipt: .legacy, transactionId: .serverAPI, signedTransaction: .serverAPI),
                         noncePolicy: .init(requiredForReceipts: false, ttlSeconds: 300), familySharingPolicy: .allow,
                         gracePeriodPolicy: .init(grantDuringGracePeriod: true, grantDuringBillingRetry: false),
                         onlineChecks: false, localOnlyJWS: false, apiKey: .sha256(String(repeating: "0", count: 64)))
    }

    static let environment = [secretVariable: currentSecret, previousVariable: previousSecret]

    static func mapping() throws -> MappingFile {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return try MappingFile.load(contentsOf: root.appendingPathComponent("Mappings/verifyReceipt/v1.json"))
    }

    /// A status-0 answer in Apple's shape: string numbers in records, app_item_id a JSON number.
    static func validAnswer(status: Int = 0, environment: String = "Production", bundleId: String = bundleId,
                            appItemId: Int64 = appAppleId, requestData: String? = nil) -> String {
        let echoed = requestData.map { #""request_data": "\#($0)","# } ?? ""
        return """
        {
          "status": \(status),
          "environment": "\(environment)",
          \(echoed)
          "receipt": {
            "receipt_type": "\(environment == "Sandbox" ? "ProductionSandbox" : "Production")",
            "adam_id": \(appItemId), "app_item_id": \(appItemId), "bundle_id": "\(bundleId)",
            "application_version": "7", "download_id": 0, "version_external_identifier": 0,
            "receipt_creation_date_ms": "1700700000000", "request_date_ms": "1700700001000",
            "original_purchase_date_ms": "1690000000000", "original_application_version": "1.0",
            "in_app": [
              {"quantity": "1", "product_id": "com.example.legacy.lifetime", "transaction_id": "1000000000000001",
               "original_transaction_id": "1000000000000001", "purchase_date_ms": "1695000000000",
               "original_purchase_date_ms": "1695000000000", "is_trial_period": "false",
               "in_app_ownership_type": "PURCHASED"},
              {"quantity": "1", "product_id": "com.example.legacy.monthly", "transaction_id": "2000000000000001",
               "original_transaction_id": "2000000000000001", "purchase_date_ms": "1696000000000",
               "original_purchase_date_ms": "1696000000000", "expires_date_ms": "1698600000000",
               "web_order_line_item_id": "3000000000000001", "is_trial_period": "true",
               "is_in_intro_offer_period": "false", "in_app_ownership_type": "PURCHASED"}
            ]
          },
          "latest_receipt_info": [
            {"quantity": "1", "product_id": "com.example.legacy.monthly", "transaction_id": "2000000000000002",
             "original_transaction_id": "2000000000000001", "purchase_date_ms": "1698600000000",
             "original_purchase_date_ms": "1696000000000", "expires_date_ms": "1701200000000",
             "web_order_line_item_id": "3000000000000002", "is_trial_period": "false",
             "is_in_intro_offer_period": "false", "in_app_ownership_type": "PURCHASED",
             "subscription_group_identifier": "20000001"}
          ],
          "pending_renewal_info": [
            {"auto_renew_product_id": "com.example.legacy.monthly", "product_id": "com.example.legacy.monthly",
             "original_transaction_id": "2000000000000001", "auto_renew_status": "1"}
          ],
          "latest_receipt": "bGF0ZXN0IHJlY2VpcHQ="
        }
        """
    }
}

/// Log lines captured from the adapter's Logger.
final class LegacyLogCapture: Sendable {
    private let lines = Mutex<[String]>([])
    var logger: Logger { Logger(minimumLevel: .debug) { line in self.lines.withLock { $0.append(line) } } }
    var all: [String] { lines.withLock { $0 } }
}

/// The waits the retry policy asked for, recorded instead of slept.
final class LegacySleepRecorder: Sendable {
    private let waits = Mutex<[Duration]>([])
    var sleep: RetryPolicy.Sleep { { duration in self.waits.withLock { $0.append(duration) } } }
    var all: [Duration] { waits.withLock { $0 } }
}

/// What the legacy adapter's suites share: scripted loopback servers stopped after each test, the
/// adapter built against them (waits recorded, logs captured), and the refusal a verification ends in.
class LegacyAdapterTestCase: XCTestCase {
    typealias F = LegacyFixtures
    private var servers: [LegacyVerifyReceiptServer] = []
    let logs = LegacyLogCapture()
    let sleeps = LegacySleepRecorder()

    override func tearDown() async throws {
        for server in servers { await server.stop() }
        servers = []
    }

    func serve(_ responder: @escaping LegacyVerifyReceiptServer.Responder) throws -> LegacyVerifyReceiptServer {
        let server = try LegacyVerifyReceiptServer(responder)
        servers.append(server)
        return server
    }

    func adapter(_ endpoints: EnvironmentURLs, maxAttempts: Int = 3, budget: Duration = .seconds(120),
                 environment: [String: String] = F.environment) throws -> LegacyReceiptAdapter {
        let client = try UpstreamHTTPClient(configuration: .init(connectTimeout: .seconds(2), requestTimeout: .seconds(10)))
        let policy = RetryPolicy(maxAttempts: maxAttempts, baseDelay: .milliseconds(100), maxDelay: .seconds(30),
                                 jitter: 0, budget: budget)
        return try LegacyReceiptAdapter(upstream: client, endpoints: endpoints, mapping: try F.mapping(), retryPolicy: policy,
                                        environmentVariables: environment, logger: logs.logger, sleep: sleeps.sleep)
    }

    func refusal(_ adapter: LegacyReceiptAdapter, nonce: String? = nil, account: String = "account-1",
                 app: AppPolicy = F.app()) async -> VerificationError? {
        do {
            _ = try await adapter.verify(.appReceipt(base64: F.receipt, nonce: nonce), account: account, for: app)
            XCTFail("verification succeeded")
            return nil
        } catch {
            return error
        }
    }
}
