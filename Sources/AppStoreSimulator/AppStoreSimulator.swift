import AppleTrust
import AppReceipts
import Foundation
import HTTPServer
import IAPCore
import Synchronization
import TestPKI

/// A local App Store on loopback, for tests, the demo and benchmarks (never production). One HTTP
/// server; the environments are path prefixes, so a gateway config points at:
///   verifyReceipt: `{baseURL}/production/verifyReceipt`, `{baseURL}/sandbox/verifyReceipt`
///   Server API:    `{baseURL}/production`, `{baseURL}/sandbox` (+ `/inApps/v1/...`)
///   admin:         `{baseURL}/admin/...`
public final class AppStoreSimulator: Sendable {
    public let pki: SimulatorPKI
    public let faults = FaultInjector()
    let store: SimulatorStore
    let receiptReader: AppReceiptReader
    private let server = Mutex<HTTPServer?>(nil)

    public init(now: @escaping @Sendable () -> Date = { Date() }) throws {
        pki = try SimulatorPKI()
        store = SimulatorStore(now: now)
        receiptReader = try AppReceiptReader(roots: [pki.rootCertificateDER])
    }

    // MARK: Lifecycle

    /// Binds to `host:port` (0: any free port) and serves until `stop()`.
    public func start(port: Int = 0, host: String = "127.0.0.1") async throws {
        let handler: HTTPHandler = { [self] request in await self.handle(request) }
        let s = try HTTPServer(configuration: HTTPServerConfiguration(host: host, port: port, maxBodyBytes: 1 << 20), handler: handler)
        try s.start()
        server.withLock { $0 = s }
    }

    public func stop() async {
        guard let s = server.withLock({ s -> HTTPServer? in defer { s = nil }; return s }) else { return }
        await s.shutdown(gracePeriod: .seconds(1))
    }

    public var port: Int { server.withLock { $0?.port ?? 0 } }
    /// `http://127.0.0.1:PORT` once started.
    public var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }
    public var productionBaseURL: String { baseURL.absoluteString + "/production" }
    public var sandboxBaseURL: String { baseURL.absoluteString + "/sandbox" }
    public var productionVerifyReceiptURL: String { productionBaseURL + "/verifyReceipt" }
    public var sandboxVerifyReceiptURL: String { sandboxBaseURL + "/verifyReceipt" }

    // MARK: Trust

    public var rootCertificateDER: Data { pki.rootCertificateDER }
    public func writeTrustRoot(to url: URL) throws { try pki.writeTrustRoot(to: url) }

    // MARK: Apps

    public func registerApp(_ app: SimulatedApp) { store.register(app) }

    /// Registers an app with a freshly generated Server API key; returns its `.p8` (PKCS#8 PEM).
    @discardableResult
    public func registerApp(bundleId: String, appAppleId: Int64, sharedSecret: String,
                            issuerId: String = "57246542-96fe-1a63-e053-0824d011072a", keyId: String = "SIMKEY0001",
                            bundleVersion: String = "1.0", notificationURL: String? = nil) throws -> SimulatedAppCredentials {
        let key = try ECPrivateKey.generate(.p256)
        store.register(SimulatedApp(bundleId: bundleId, appAppleId: appAppleId, sharedSecret: sharedSecret, issuerId: issuerId,
                                    keyId: keyId, apiPublicKey: key.publicKey, bundleVersion: bundleVersion,
                                    notificationURL: notificationURL))
        return SimulatedAppCredentials(bundleId: bundleId, issuerId: issuerId, keyId: keyId, privateKeyPEM: key.pkcs8PEM)
    }

    // MARK: Purchases and lifecycle

    public func purchase(_ request: PurchaseRequest) throws -> SimulatedPurchase {
        try result(for: try store.purchase(request))
    }

    /// A purchase of which only the signed transaction is wanted (a benchmark's pool of new grants):
    /// the receipt `purchase` also signs would cost most of the time and be thrown away.
    public func purchaseSignedTransaction(_ request: PurchaseRequest) throws -> String {
        try signedTransaction(try store.purchase(request))
    }

    /// A renewal: a new transaction in the same chain, starting at the previous expiry.
    public func renew(originalTransactionId: String) throws -> SimulatedPurchase {
        try result(for: try store.renew(originalTransactionId: originalTransactionId))
    }

    /// An upgrade to `productId`: the current period is cancelled (`is_upgraded`), a new one starts now.
    public func changeProduct(originalTransactionId: String, to productId: String) throws -> SimulatedPurchase {
        try result(for: try store.renew(originalTransactionId: originalTransactionId, productId: productId, upgrade: true))
    }

    /// Expires the subscription now (intent 1 customer cancelled, 2 billing error, ...). With
    /// `billingRetry`, `gracePeriodSeconds` opens Apple's Billing Grace Period from now.
    public func expire(originalTransactionId: String, intent: Int64 = 1, billingRetry: Bool = false,
                       gracePeriodSeconds: Int64? = nil) throws -> SimulatedPurchase {
        try result(for: try store.expire(originalTransactionId: originalTransactionId, intent: intent,
                                         billingRetry: billingRetry, gracePeriodSeconds: gracePeriodSeconds))
    }

    /// REFUND_REVERSED: the revocation fields leave the transaction.
    public func reverseRefund(transactionId: String) throws -> SimulatedPurchase {
        try result(for: try store.reverseRefund(transactionId: transactionId))
    }

    /// Turns auto-renew on or off, or picks the product of the next period (downgrade). Returns
    /// the chain's latest transaction.
    public func changeRenewalPreference(originalTransactionId: String, autoRenew: Bool? = nil,
                                        productId: String? = nil) throws -> SimulatedPurchase {
        try result(for: try store.changeRenewalPreference(originalTransactionId: originalTransactionId,
                                                          autoRenew: autoRenew, productId: productId))
    }

    /// A refund: `revocationDate` now, `revocationReason` (0 other, 1 app issue), `REFUND_FULL`.
    public func refund(transactionId: String, reason: Int64 = 0) throws -> SimulatedPurchase {
        try result(for: try store.revoke(transactionId: transactionId, reason: reason, type: .refundFull))
    }

    /// A partial refund: `REFUND_PRORATED` with the share refunded (`revocationPercentage`, milliunits).
    public func refundProrated(transactionId: String, percentage: Int64, reason: Int64 = 0) throws -> SimulatedPurchase {
        try result(for: try store.revoke(transactionId: transactionId, reason: reason, type: .refundProrated, percentage: percentage))
    }

    /// Family Sharing access withdrawn: `revocationDate` now, no reason, `FAMILY_REVOKE`.
    public func revoke(transactionId: String) throws -> SimulatedPurchase {
        try result(for: try store.revoke(transactionId: transactionId, reason: nil, type: .familyRevoke))
    }

    /// The owner's current receipt (base64), every purchase of the owner in that app and environment.
    public func receipt(owner: String, bundleId: String, environment: AppStoreEnvironment = .production) throws -> String {
        Data(try receiptDER(owner: owner, bundleId: bundleId, environment: environment)).base64EncodedString()
    }

    public func signedTransaction(transactionId: String) throws -> String {
        guard let t = store.transaction(transactionId) else { throw SimulatorError("no transaction \(transactionId)") }
        return try signedTransaction(t)
    }

    func signedTransaction(_ t: TransactionRecord) throws -> String {
        try pki.signJWS(SignedPayloads.transaction(t, signedDate: store.nowMs))
    }

    /// Records that `owner` bought (downloaded) the app itself at `originalApplicationVersion` and
    /// `originalPurchaseDate`: what its AppTransaction and receipts state. Returns its appTransactionId.
    @discardableResult
    public func setAppPurchase(owner: String, bundleId: String, environment: AppStoreEnvironment = .production,
                               originalApplicationVersion: String, originalPurchaseDate: Int64) -> String {
        store.setAppPurchase(AppPurchase(originalApplicationVersion: originalApplicationVersion,
                                         originalPurchaseDate: originalPurchaseDate),
                             owner: owner, bundleId: bundleId, environment: environment)
    }

    /// The owner's AppTransaction as StoreKit 2's `AppTransaction.shared` hands it to the app (JWS).
    public func signedAppTransaction(owner: String, bundleId: String, environment: AppStoreEnvironment = .production) throws -> String {
        guard let app = store.app(bundleId) else { throw SimulatorError("unknown app \(bundleId)") }
        let id = store.setAppPurchase(appPurchase(owner: owner, bundleId: bundleId, environment: environment),
                                      owner: owner, bundleId: bundleId, environment: environment)
        return try pki.signJWS(SignedPayloads.appTransaction(app: app, environment: environment, appTransactionId: id,
                                                             purchase: appPurchase(owner: owner, bundleId: bundleId,
                                                                                   environment: environment),
                                                             signedDate: store.nowMs))
    }

    /// The owner's download of the app: as set, else version "1.0" bought now.
    func appPurchase(owner: String, bundleId: String, environment: AppStoreEnvironment) -> AppPurchase {
        store.appPurchase(owner: owner, bundleId: bundleId, environment: environment)
            ?? AppPurchase(originalApplicationVersion: "1.0", originalPurchaseDate: store.nowMs)
    }

    /// The Finish Transaction calls the simulator answered, oldest first.
    public var finishTransactionCalls: [FinishTransactionCall] { store.finishCalls }

    public func signedRenewalInfo(originalTransactionId: String) throws -> String {
        guard let c = store.chain(originalTransactionId), let latest = store.transaction(c.latestTransactionId) else {
            throw SimulatorError("no auto-renewable subscription \(originalTransactionId)")
        }
        return try pki.signJWS(SignedPayloads.renewalInfo(c, latest: latest, signedDate: store.nowMs))
    }

    func result(for t: TransactionRecord) throws -> SimulatedPurchase {
        SimulatedPurchase(
            transactionId: t.transactionId, originalTransactionId: t.originalTransactionId,
            receiptBase64: try receipt(owner: t.owner, bundleId: t.bundleId, environment: t.environment),
            signedTransaction: try signedTransaction(t),
            environment: t.environment, bundleId: t.bundleId, productId: t.productId, orderId: t.orderId)
    }

    func receiptDER(owner: String, bundleId: String, environment: AppStoreEnvironment) throws -> [UInt8] {
        guard let app = store.app(bundleId) else { throw SimulatorError("unknown app \(bundleId)") }
        let transactions = store.transactions(owner: owner, bundleId: bundleId, environment: environment)
        let download = store.appPurchase(owner: owner, bundleId: bundleId, environment: environment)
        let now = store.nowMs
        let builder = ReceiptBuilder(
            receiptType: environment == .sandbox ? "ProductionSandbox" : "Production",
            appItemId: environment == .sandbox ? 0 : app.appAppleId, bundleId: bundleId, appVersion: app.bundleVersion,
            originalAppVersion: download?.originalApplicationVersion ?? "1.0", creationDate: now,
            originalPurchaseDate: download?.originalPurchaseDate ?? transactions.first?.originalPurchaseDate ?? now,
            inApps: transactions.map(ReceiptBuilder.InApp.init),
            // A recorded download of the app is named by its appTransactionId (numeric here).
            downloadId: download.flatMap { Int64(store.setAppPurchase($0, owner: owner, bundleId: bundleId, environment: environment)) })
        return try builder.signed(with: pki)
    }
}

/// The Server API credentials of an app registered with a generated key.
public struct SimulatedAppCredentials: Sendable {
    public let bundleId: String
    public let issuerId: String
    public let keyId: String
    /// The `.p8` private key (PKCS#8 PEM) a client signs its JWTs with.
    public let privateKeyPEM: String
}

/// One Finish Transaction call the simulator answered.
public struct FinishTransactionCall: Hashable, Sendable {
    public let transactionId: String
    public let bundleId: String
    public let environment: AppStoreEnvironment
    /// The simulator's clock when it answered (ms since 1970).
    public let at: Int64
}
