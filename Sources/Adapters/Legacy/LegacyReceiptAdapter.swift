import AppReceipts
import Foundation
import IAPConfig
import IAPCore
import IAPMapping
import Synchronization
import UpstreamHTTP

/// Verifies a legacy base64 app receipt through Apple's `verifyReceipt` and normalises the answer.
///
/// Production first (Apple's rule: App Review tests production builds against the sandbox), then the
/// sandbox on 21007 only where the claim's policy accepts Sandbox (the app's App Review accounts).
/// Where the policy does not accept Production at all it starts at the sandbox, and follows 21008
/// (a production receipt) only if the policy accepts Production.
/// Shared-secret rotation: on 21004 with the current secret the `previous` one is tried, and each
/// verification it rescues is counted and logged, so the team knows when it can be retired.
public struct LegacyReceiptAdapter: MappedAdapter, ReceiptReverifying {
    public let id: AdapterID = .verifyReceipt

    private let exchange: VerifyReceiptExchange
    private let endpoints: EnvironmentURLs
    private let normalizer: LegacyReceiptNormalizer
    private let environmentVariables: [String: String]
    private let logger: Logger
    private let previousSecretCounter = PreviousSecretCounter()

    /// `mapping` is the verifyReceipt mapping file to normalise with (normally the latest one);
    /// `sleep` waits between retries and is injectable so tests take no time.
    public init(upstream: any VerifyReceiptTransport, endpoints: EnvironmentURLs, mapping: MappingFile,
                retryPolicy: RetryPolicy = RetryPolicy(),
                environmentVariables: [String: String] = ProcessInfo.processInfo.environment,
                logger: Logger = .disabled, maxResponseBytes: Int = 4 << 20,
                sleep: @escaping RetryPolicy.Sleep = RetryPolicy.taskSleep) throws(VerificationError) {
        normalizer = try LegacyReceiptNormalizer(mapping)
        exchange = VerifyReceiptExchange(transport: upstream, retryPolicy: retryPolicy, sleep: sleep,
                                         maxResponseBytes: maxResponseBytes, logger: logger)
        self.endpoints = endpoints
        self.environmentVariables = environmentVariables
        self.logger = logger
    }

    /// Verifications that succeeded only with the previous shared secret, per bundle id, since start.
    public var previousSecretUses: [String: Int] { previousSecretCounter.snapshot }

    public func previousSecretUses(bundleId: String) -> Int { previousSecretCounter.snapshot[bundleId] ?? 0 }

    public var mappingVersion: String { normalizer.mapping.id }

    static let forms: [EvidenceForm] = [.receipt]
    public var evidenceForms: [EvidenceForm] { Self.forms }

    public func verify(_ evidence: PurchaseEvidence, for app: AppPolicy, policy: any EvidencePolicy)
        async throws(VerificationError) -> AdapterOutcome {
        let (receipt, nonce) = (evidence.value, evidence.nonce)
        guard evidence.kind == .receipt else {
            throw VerificationError(.invalidConfiguration, "verifyReceipt verifies app receipts only, not \(evidence.kind)")
        }
        // Refuse what Apple would refuse anyway before spending a call on it (same codes as local parsing).
        let der = try StrictBase64.decode(receipt)
        // Another app's receipt: Apple would check our shared secret against *that* app and answer
        // 21004, which reads as "our credentials are wrong" and pages an operator. An unverified
        // read is enough to refuse (never to accept); undecodable receipts still go to Apple.
        if let bundle = (try? AppReceipt.parseUnverified(pkcs7: der))?.bundleId {
            try policy.admit(EvidenceIdentity(bundleId: bundle))
        }
        guard let reference = app.sharedSecret else {
            throw VerificationError(.invalidConfiguration, "\(app.bundleId): no sharedSecret configured for verifyReceipt")
        }
        var secret = try Self.resolve(reference, previous: false, environment: environmentVariables, app: app)
        var triedPrevious = false
        var previousUseCounted = false
        var environment: AppStoreEnvironment = policy.accepts(.production) ? .production : .sandbox
        var switchedEnvironment = false
        let log = logger.with(["bundleId": app.bundleId])

        while true {
            let body = Self.requestBody(receipt: receipt, password: secret, nonce: nonce)
            let answer = try await exchange.post(body, to: environment, url: endpoints.url(for: environment))
            log.info("verify_receipt_answered", ["environment": environment.rawValue, "status": String(answer.status)])
            AppleAnswerNote.note(String(answer.status))
            let meaning = VerifyReceiptStatus(answer.status)
            if triedPrevious, !previousUseCounted, meaning != .secretRejected {
                // Apple accepted the previous secret: once per verification, whatever the receipt turns out to be.
                previousUseCounted = true
                previousSecretCounter.increment(app.bundleId)
                log.warning("shared_secret_previous_used", [:])
            }
            switch meaning {
            case .valid:
                do throws(VerificationError) {
                    return try outcome(answer.json, nonce: nonce, app: app, policy: policy)
                } catch where Self.isShapeFault(error.code) {
                    // Apple's answer, not the client's receipt, lacks a member or has one of the wrong type.
                    throw VerificationError(.upstreamInvalidResponse, "verifyReceipt answer: \(error.message)")
                }
            case .sandboxReceipt where environment == .production && !switchedEnvironment:
                // 21007: a Sandbox receipt. Asked about there only if the claim may be answered from Sandbox.
                try policy.admit(EvidenceIdentity(environment: .sandbox))
                environment = .sandbox
                switchedEnvironment = true
            case .productionReceipt where environment == .sandbox && !switchedEnvironment:
                try policy.admit(EvidenceIdentity(environment: .production))
                environment = .production
                switchedEnvironment = true
            case .sandboxReceipt, .productionReceipt:
                throw VerificationError(.upstreamUnavailable,
                                        "verifyReceipt sent the receipt back to the environment it came from (\(answer.status))")
            case .secretRejected:
                guard reference.previous != nil, !triedPrevious else {
                    throw VerificationError(.upstreamCredentialsRejected,
                                            "\(app.bundleId): verifyReceipt rejected the shared secret \(reference) (21004)")
                }
                secret = try Self.resolve(reference, previous: true, environment: environmentVariables, app: app)
                triedPrevious = true
            case .temporary:
                throw VerificationError(.upstreamUnavailable, "verifyReceipt answered temporary status \(answer.status)")
            case .refused(let code, let message):
                throw VerificationError(code, "\(app.bundleId): \(message)")
            }
        }
    }

    public func reverify(receipt base64: String, for app: AppPolicy, policy: any EvidencePolicy)
        async throws(VerificationError) -> AdapterOutcome {
        try await verify(.appReceipt(base64: base64, nonce: nil), for: app, policy: policy)
    }

    /// The secret as last read (`SecretFiles`: a rotation takes effect without a restart). Errors name the reference only.
    private static func resolve(_ reference: SecretReference, previous: Bool, environment: [String: String],
                                app: AppPolicy) throws(VerificationError) -> String {
        do throws(VerificationError) {
            if previous {
                guard let value = try reference.resolvePrevious(environment: environment) else {
                    throw VerificationError(.invalidConfiguration, "secret \(reference) has no previous")
                }
                return value
            }
            return try reference.resolve(environment: environment)
        } catch {
            throw VerificationError(error.code, "\(app.bundleId): shared secret: \(error.message)")
        }
    }

    static func requestBody(receipt: String, password: String, nonce: String?) -> [UInt8] {
        var object: [String: JSONValue] = [
            "receipt-data": .string(receipt),
            "password": .string(password),
            // Only the latest transaction of each subscription: smaller answers, and in_app still
            // carries the non-subscription purchases.
            "exclude-old-transactions": .bool(true),
        ]
        if let nonce { object["request_data"] = .string(nonce) }
        return Array(JSONValue.object(object).jsonText.utf8)
    }

    /// A valid answer: what it states about the receipt is put to the policy before anything of it is
    /// used (environment, bundle, app id), then the nonce echo, then normalisation.
    private func outcome(_ json: JSONValue, nonce: String?, app: AppPolicy, policy: any EvidencePolicy)
        throws(VerificationError) -> AdapterOutcome {
        let top = try JSONFields(json, context: "verifyReceipt response")
        guard let environment = try top.open("environment", as: AppStoreEnvironment.self) else {
            throw VerificationError(.missingField, "verifyReceipt response has no environment")
        }
        guard let receipt = try top.fields("receipt") else {
            throw VerificationError(.missingField, "verifyReceipt response has no receipt")
        }
        try policy.admit(EvidenceIdentity(bundleId: try receipt.string("bundle_id"), appAppleId: try receipt.int64("app_item_id"),
                                          environment: environment, kind: .receipt))
        if let nonce { try nonceEcho(of: nonce, in: [("response", top), ("receipt", receipt)], app: app) }
        let normalized = try normalizer.normalize(verifyReceiptResponse: json)
        if !normalized.unmappedFields.isEmpty {
            logger.info("verify_receipt_unmapped_fields", ["bundleId": app.bundleId,
                                                           "fields": normalized.unmappedFields.joined(separator: ",")])
        }
        return AdapterOutcome(adapter: id, environment: environment, transactions: normalized.transactions,
                              renewals: normalized.renewals, appTransaction: normalized.appTransaction,
                              mappingVersion: normalized.mappingVersion,
                              followUps: try top.string("latest_receipt").map { [KeepLatestReceipt(receipt: $0)] } ?? [])
    }
}

extension LegacyReceiptAdapter {
    /// Codes that, inside a verifyReceipt answer, say the answer is not Apple's documented shape.
    static func isShapeFault(_ code: VerificationError.Code) -> Bool {
        [.malformedJSON, .duplicateJSONKey, .invalidFieldType, .missingField].contains(code)
    }

    /// The nonce as Apple echoed it (`request_data`, at the top level or inside `receipt`). Enforced
    /// only where Apple echoes a string: a differing echo refuses; no echo proves nothing either way
    /// (the gateway's own nonce ledger is what stops replays); an echo of another shape is not
    /// Apple's documented one and is ignored with a log line rather than refusing a purchase.
    func nonceEcho(of nonce: String, in places: [(String, JSONFields)], app: AppPolicy) throws(VerificationError) {
        for (place, fields) in places {
            switch fields.object["request_data"] {
            case nil, .null?:
                continue
            case .string(let echo)?:
                guard echo == nonce else {
                    throw VerificationError(.nonceInvalid, "\(app.bundleId): verifyReceipt echoed another request_data")
                }
            case let other?:
                logger.warning("verify_receipt_request_data_ignored", ["bundleId": app.bundleId, "where": place,
                                                                       "type": other.typeName])
            }
        }
    }
}

/// Counts, per bundle id, the verifications the previous shared secret rescued.
final class PreviousSecretCounter: Sendable {
    private let counts = Mutex<[String: Int]>([:])
    func increment(_ bundleId: String) { counts.withLock { $0[bundleId, default: 0] += 1 } }
    var snapshot: [String: Int] { counts.withLock { $0 } }
}
