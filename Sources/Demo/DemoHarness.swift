import AppStoreSimulator
import AppleTrust
import Foundation
import Gateway
import HTTPServer
import IAPConfig
import IAPCore

/// A gateway wired to a local App Store simulator on loopback, configured through real files
/// (written under `directory`, then loaded by `ConfigLoader` like any deployment's). Used by
/// `iapgw-dev demo` and by the end-to-end tests, so both exercise exactly the production code path.
public final class DemoHarness: Sendable {
    public struct Options: Sendable {
        public var bundleId = "com.example.demo"
        public var appAppleId: Int64 = 1_234_567_890
        public var allowedEnvironments: [String] = ["Production", "Sandbox"]
        public var sandboxAccounts: [String] = []
        public var receiptRouting = "legacy"
        /// The receipt routing's `rollout` plan, as plain-XML elements (with `receiptRouting = "rollout"`).
        public var rolloutPlanXML: String?
        public var signedTransactionRouting = "serverAPI"
        public var nonceRequired = true
        public var familySharing = "allow"
        public var localOnlyJWS = false
        /// The policy's `finishTransactions`.
        public var finishTransactions = false
        /// The policy's `grandfathering` rule; nil: none.
        public var grandfathering: AppPolicy.Grandfathering?
        /// `limits.maxJWSBytes` of the gateway file.
        public var maxJWSBytes = 65_536
        /// Where entitlement changes are posted (a loopback receiver in tests); nil: no webhook.
        public var webhookURL: String?
        /// A shared secret being rotated out (`sharedSecret.previous`, file secrets/shared-secret-previous).
        public var previousSharedSecret: String?
        /// The app's cutover readiness thresholds; nil: the documented defaults.
        public var readiness: AppPolicy.Readiness?
        /// More of the app's policy, as plain-XML elements appended to the app file (offers, retention rules).
        public var extraPolicyXML = ""
        public var gatewayPort = 0
        /// PEM files the gateway serves HTTPS with (its `tls` section); nil: plain HTTP.
        public var tlsFiles: (certificate: String, privateKey: String)?
        public var simulatorPort = 0
        /// `timeouts.budgetSeconds`: all the upstream work of one gateway request ends within it.
        public var upstreamBudgetSeconds = 20
        /// The simulator's clock (its purchase, expiry and signedDate times); tests pass a strictly
        /// increasing one so that events made one after another never share a millisecond.
        public var simulatorClock: @Sendable () -> Date = { Date() }
        /// The gateway's entitlement sweep interval (`IAPGW_ENTITLEMENT_SWEEP_SECONDS`); nil: the
        /// process environment's setting or the default.
        public var entitlementSweepSeconds: Int64?
        /// The ledger's `storageURL` (a test's PostgreSQL database); nil: a SQLite file in the directory.
        public var storageURL: String?
        /// productId → (type, price in milliunits, currency)
        public var catalog: [(String, TransactionType, Int64, String)] = [
            ("com.example.demo.pro.monthly", .autoRenewable, 4_990, "USD"),
            ("com.example.demo.removeads", .nonConsumable, 2_990, "USD"),
            ("com.example.demo.coins100", .consumable, 990, "USD"),
        ]
        public init() {}
    }

    public let simulator: AppStoreSimulator
    public let service: GatewayService
    /// What the gateway is made of: reconciliation, batch comparison and inbox maintenance are made from it.
    public let parts: GatewayParts
    public let server: HTTPServer
    /// The inbox processor and webhook dispatcher.
    public let background: Task<Void, Never>
    public let directory: URL
    public let apiKey: String
    public let sharedSecret: String
    /// The HMAC key the gateway signs webhooks with (written to secrets/webhook-secret).
    public let webhookSecret: String
    public let options: Options

    public var gatewayURL: String { "\(options.tlsFiles == nil ? "http" : "https")://127.0.0.1:\(server.port)" }
    /// Where the simulator (as Apple) posts this app's notifications.
    public var notificationURL: String { "\(gatewayURL)/v1/notifications/\(options.bundleId)" }
    public var bundleId: String { options.bundleId }

    public static func start(directory: URL, options: Options = Options(), logger: Logger = .disabled) async throws -> DemoHarness {
        let simulator = try AppStoreSimulator(now: options.simulatorClock)
        try await simulator.start(port: options.simulatorPort)
        let sharedSecret = Self.randomHex(16)
        let apiKey = "demo-" + Self.randomHex(16)
        let credentials = try simulator.registerApp(bundleId: options.bundleId, appAppleId: options.appAppleId,
                                                    sharedSecret: sharedSecret)
        let fm = FileManager.default
        for sub in ["apps", "trust", "secrets"] {
            try fm.createDirectory(at: directory.appendingPathComponent(sub), withIntermediateDirectories: true)
        }
        try simulator.writeTrustRoot(to: directory.appendingPathComponent("trust/simulator-root.cer"))
        try Self.writeSecret(sharedSecret, to: directory.appendingPathComponent("secrets/shared-secret"))
        if let previous = options.previousSharedSecret {
            try Self.writeSecret(previous, to: directory.appendingPathComponent("secrets/shared-secret-previous"))
        }
        try Self.writeSecret(credentials.privateKeyPEM, to: directory.appendingPathComponent("secrets/AuthKey.p8"))
        let webhookSecret = "whsec-" + Self.randomHex(16)
        try Self.writeSecret(webhookSecret, to: directory.appendingPathComponent("secrets/webhook-secret"))
        try Self.appXML(options, credentials: credentials, apiKeySHA256: SHA256Digest.lowercaseHex(Array(apiKey.utf8)))
            .write(to: directory.appendingPathComponent("apps/\(options.bundleId).xml"), atomically: true, encoding: .utf8)
        try Self.gatewayXML(options, simulator: simulator,
                            storageURL: options.storageURL ?? "sqlite:" + directory.appendingPathComponent("iapgw.sqlite").path)
            .write(to: directory.appendingPathComponent("gateway.xml"), atomically: true, encoding: .utf8)

        let configuration = try ConfigLoader.loadAll(configDirectory: directory, adapters: GatewayAssembly.catalog())
        let mappings = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Mappings")
        var environment = ProcessInfo.processInfo.environment
        if let seconds = options.entitlementSweepSeconds { environment["IAPGW_ENTITLEMENT_SWEEP_SECONDS"] = String(seconds) }
        // Only SQLite keeps a seal key file beside its database; a shared database needs one configured.
        if options.storageURL != nil, environment["IAPGW_RECEIPT_SEAL_KEY"] == nil {
            environment["IAPGW_RECEIPT_SEAL_KEY"] = Self.randomHex(32)
        }
        let assembly = GatewayAssembly(configuration: configuration, mappingsDirectory: mappings, environment: environment,
                                       logger: logger)
        // As `iapgw serve` starts: the blocking work on a thread of its own.
        let parts = try await GatewayAssembly.offPool { () throws(VerificationError) in try assembly.makeParts() }
        let (service, server, background) = try await assembly.start(parts)
        return DemoHarness(simulator: simulator, service: service, parts: parts, server: server, background: background,
                           directory: directory, apiKey: apiKey, sharedSecret: sharedSecret,
                           webhookSecret: webhookSecret, options: options)
    }

    private init(simulator: AppStoreSimulator, service: GatewayService, parts: GatewayParts, server: HTTPServer,
                 background: Task<Void, Never>, directory: URL, apiKey: String, sharedSecret: String, webhookSecret: String,
                 options: Options) {
        self.webhookSecret = webhookSecret
        self.simulator = simulator
        self.background = background
        self.service = service
        self.parts = parts
        self.server = server
        self.directory = directory
        self.apiKey = apiKey
        self.sharedSecret = sharedSecret
        self.options = options
    }

    public func stop() async {
        await server.shutdown(gracePeriod: .seconds(2))
        await service.finishShadowWork()
        background.cancel()
        _ = await background.value
        await simulator.stop()
    }

    static func randomHex(_ bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    static func writeSecret(_ text: String, to url: URL) throws {
        guard FileManager.default.createFile(atPath: url.path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw VerificationError(.storageUnavailable, "cannot write \(url.path)")
        }
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    static func items(_ values: [String]) -> String { values.map { "<item>\(escape($0))</item>" }.joined() }

    static func appXML(_ o: Options, credentials: SimulatedAppCredentials, apiKeySHA256: String) -> String {
        let products = o.catalog.map { id, type, price, currency in
            "<item><productId>\(escape(id))</productId><type>\(escape(type.rawValue))</type>"
                + "<priceMilliunits type=\"integer\">\(price)</priceMilliunits><currency>\(currency)</currency></item>"
        }.joined(separator: "\n        ")
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <!-- Written by the IAPGateway demo: an app whose App Store is the local simulator. -->
            <app bundleId="\(escape(o.bundleId))">
                <appAppleId type="integer">\(o.appAppleId)</appAppleId>
                <allowedEnvironments type="array">\(items(o.allowedEnvironments))</allowedEnvironments>
                <sandboxAccounts type="array">\(items(o.sandboxAccounts))</sandboxAccounts>
                <trustRoots>
                    <jws type="array"><item>../trust/simulator-root.cer</item></jws>
                    <receipts type="array"><item>../trust/simulator-root.cer</item></receipts>
                </trustRoots>
                <sharedSecret><file>../secrets/shared-secret</file>\(o.previousSharedSecret == nil ? "" : "<previous><file>../secrets/shared-secret-previous</file></previous>")</sharedSecret>
                <serverAPI>
                    <issuerId>\(credentials.issuerId)</issuerId>
                    <keyId>\(credentials.keyId)</keyId>
                    <privateKey><file>../secrets/AuthKey.p8</file></privateKey>
                </serverAPI>
                <productCatalog type="array">
                    \(products)
                </productCatalog>
                <routing>
                    <receipt>\(o.receiptRouting)</receipt>
                    <transactionId>serverAPI</transactionId>
                    <signedTransaction>\(o.signedTransactionRouting)</signedTransaction>
                    \(o.rolloutPlanXML.map { "<rollout>\($0)</rollout>" } ?? "")
                </routing>
                <noncePolicy>
                    <requiredForReceipts type="bool">\(o.nonceRequired)</requiredForReceipts>
                    <ttlSeconds type="integer">300</ttlSeconds>
                </noncePolicy>
                <familySharingPolicy>\(o.familySharing)</familySharingPolicy>
                <gracePeriodPolicy>
                    <grantDuringGracePeriod type="bool">true</grantDuringGracePeriod>
                    <grantDuringBillingRetry type="bool">false</grantDuringBillingRetry>
                </gracePeriodPolicy>
                <onlineChecks type="bool">false</onlineChecks>
                <localOnlyJWS type="bool">\(o.localOnlyJWS)</localOnlyJWS>
                <finishTransactions type="bool">\(o.finishTransactions)</finishTransactions>
                \(o.grandfathering.map(grandfatheringXML) ?? "")
                <apiKey><sha256>\(apiKeySHA256)</sha256></apiKey>
                \(o.webhookURL.map { "<webhook><url>\(escape($0))</url><secret><file>../secrets/webhook-secret</file></secret></webhook>" } ?? "")
                \(o.readiness.map(readinessXML) ?? "")
                \(o.extraPolicyXML)
            </app>

            """
    }

    static func grandfatheringXML(_ g: AppPolicy.Grandfathering) -> String {
        "<grandfathering><productIds type=\"array\">"
            + g.productIds.map { "<item>\(escape($0))</item>" }.joined() + "</productIds>"
            + (g.beforeOriginalApplicationVersion.map { "<beforeOriginalApplicationVersion>\(escape($0))</beforeOriginalApplicationVersion>" } ?? "")
            + (g.beforeOriginalPurchaseDate.map { "<beforeOriginalPurchaseDate type=\"integer\">\($0)</beforeOriginalPurchaseDate>" } ?? "")
            + "</grandfathering>"
    }

    static func readinessXML(_ r: AppPolicy.Readiness) -> String {
        let explained = r.explainedFailures.sorted { $0.key < $1.key }
            .map { "<item><code>\(escape($0.key))</code><reason>\(escape($0.value))</reason></item>" }.joined()
        return "<readiness><agreementThreshold>\(r.agreementThreshold)</agreementThreshold>"
            + "<minimumPurchaseChains type=\"integer\">\(r.minimumPurchaseChains)</minimumPurchaseChains>"
            + "<minimumAccounts type=\"integer\">\(r.minimumAccounts)</minimumAccounts>"
            + "<minimumObservationDays type=\"integer\">\(r.minimumObservationDays)</minimumObservationDays>"
            + "<explainedFailures type=\"array\">\(explained)</explainedFailures></readiness>"
    }

    static func gatewayXML(_ o: Options, simulator: AppStoreSimulator, storageURL: String) -> String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <!-- Written by the IAPGateway demo: upstreams point at the local App Store simulator. -->
        <gateway>
            <listenAddress>127.0.0.1</listenAddress>
            <listenPort type="integer">\(o.gatewayPort)</listenPort>
            <storageURL>\(escape(storageURL))</storageURL>
            <upstream>
                <verifyReceiptProduction>\(simulator.productionVerifyReceiptURL)</verifyReceiptProduction>
                <verifyReceiptSandbox>\(simulator.sandboxVerifyReceiptURL)</verifyReceiptSandbox>
                <serverAPIProduction>\(simulator.productionBaseURL)</serverAPIProduction>
                <serverAPISandbox>\(simulator.sandboxBaseURL)</serverAPISandbox>
            </upstream>
            <timeouts>
                <connectSeconds type="integer">2</connectSeconds>
                <requestSeconds type="integer">5</requestSeconds>
                <budgetSeconds type="integer">\(o.upstreamBudgetSeconds)</budgetSeconds>
            </timeouts>
            <limits>
                <maxBodyBytes type="integer">262144</maxBodyBytes>
                <maxJWSBytes type="integer">\(o.maxJWSBytes)</maxJWSBytes>
            </limits>
            <appsDirectory>apps</appsDirectory>\(o.tlsFiles.map { tls in
                "\n    <tls><certificateFile>\(escape(tls.certificate))</certificateFile>"
                    + "<privateKeyFile>\(escape(tls.privateKey))</privateKeyFile></tls>" } ?? "")
        </gateway>

        """
    }
}
