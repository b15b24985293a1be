import Foundation
import IAPCore

/// Gateway-wide settings from `Config/gateway.xml` or `Config/gateway.plist` (root `<gateway>` in
/// plain XML). Every key is optional; an absent key takes the default shown here.
public struct GatewayConfig: Sendable, Equatable {
    public var listenAddress: String = "127.0.0.1"
    public var listenPort: Int = 8080
    /// `storageURL`: `sqlite:<path>` (relative to the working directory) or `postgresql://…`.
    public var storage: LedgerStorage = .sqlite(path: "var/iapgw.sqlite")
    public var upstream = Upstream()
    public var timeouts = Timeouts()
    public var limits = Limits()
    /// This instance's name among those sharing a database, the same across its restarts (so it can
    /// take back at once the webhook and finish leases it held when it crashed). Nil: the one instance of an
    /// SQLite file needs none; on PostgreSQL each start is then a new instance.
    public var instanceId: String?
    public var webhooks = Webhooks()
    /// Where the per-app files are; `apps` next to the gateway file unless set.
    public var appsDirectory: URL
    /// HTTPS served by the gateway itself; nil (the default): plain HTTP, for a gateway behind a proxy.
    public var tls: TLS?
    /// The periodic work of `iapgw serve` (each overridden by its environment variable when set).
    public var background = Background()
    /// The 64 hex digits that seal stored receipts (AES-256-GCM), as a secret reference; nil: a key
    /// file beside the SQLite database. `IAPGW_RECEIPT_SEAL_KEY` overrides it.
    public var receiptSealKey: SecretReference?

    public init(appsDirectory: URL) { self.appsDirectory = appsDirectory }

    /// Apple's real endpoints by default; the simulator or a test points them elsewhere. The Server
    /// API hosts are the ones Apple recommends since 2026-05-05; the older `api.storekit.itunes.apple.com`
    /// and `api.storekit-sandbox.itunes.apple.com` still answer and are still accepted in config.
    public struct Upstream: Sendable, Equatable {
        public var verifyReceipt = EnvironmentURLs(production: "https://buy.itunes.apple.com/verifyReceipt",
                                                   sandbox: "https://sandbox.itunes.apple.com/verifyReceipt")
        public var serverAPI = EnvironmentURLs(production: "https://api.storekit.apple.com",
                                               sandbox: "https://api.storekit-sandbox.apple.com")
    }

    public struct Timeouts: Sendable, Equatable {
        /// One upstream attempt: its connect, and the whole exchange.
        public var connectSeconds: Int64 = 5
        public var requestSeconds: Int64 = 15
        /// How long a request waits for any one storage call before it answers 503 STORAGE_UNAVAILABLE
        /// (also PostgreSQL's statement and lock timeouts, SQLite's busy timeout).
        public var storageSeconds: Int64 = 5
        /// All the upstream work of one gateway request (every call, attempt and retry wait) ends
        /// within this; each background call is bounded by it too.
        public var budgetSeconds: Int64 = 20
    }

    public struct Webhooks: Sendable, Equatable {
        /// How long a webhook event taken for delivery, or a finish outbox row being sent, stays one
        /// instance's without renewal (renewed every third of it while worked on): after a crash, the
        /// work resumes within about this long.
        public var leaseSeconds: Int64 = 10
        /// Deliveries in flight at once to one receiver (each chain's events still one at a time, in
        /// order): a receiver answering in L seconds takes up to this many / L events a second.
        public var concurrency: Int64 = 8
    }

    /// Intervals of `serve`'s background work. The environment overrides each (`overridden(by:)`).
    public struct Background: Sendable, Equatable {
        /// A reconciliation pass every this many seconds (0: none; `iapgw reconcile` still runs one).
        public var reconcileIntervalSeconds: Int64 = 900
        /// Raw notification bodies are kept this many days.
        public var notificationRetentionDays: Int64 = 30
        /// Audit records (the support history) are kept this many days.
        public var auditRetentionDays: Int64 = 400
        /// How often entitlements whose period ended by time alone are moved and announced.
        public var entitlementSweepSeconds: Int64 = 30
        /// An answer stored under an `Idempotency-Key` is replayed for this many hours (at least a day,
        /// as payment APIs keep theirs).
        public var idempotencyKeyHours: Int64 = 24

        public init() {}

        /// Each setting: its key in the gateway file, its environment variable, its range.
        static var settings: [(key: String, variable: String, range: ClosedRange<Int64>,
                               value: WritableKeyPath<Background, Int64>)] { [
            ("reconcileIntervalSeconds", "IAPGW_RECONCILE_INTERVAL_SECONDS", 0...86_400, \.reconcileIntervalSeconds),
            ("notificationRetentionDays", "IAPGW_NOTIFICATION_RETENTION_DAYS", 1...3_650, \.notificationRetentionDays),
            ("auditRetentionDays", "IAPGW_AUDIT_RETENTION_DAYS", 1...3_650, \.auditRetentionDays),
            ("entitlementSweepSeconds", "IAPGW_ENTITLEMENT_SWEEP_SECONDS", 1...60, \.entitlementSweepSeconds),
            ("idempotencyKeyHours", "IAPGW_IDEMPOTENCY_KEY_HOURS", 24...8_760, \.idempotencyKeyHours),
        ] }

        /// These settings with each one's environment variable, where set, taking its place.
        public func overridden(by environment: [String: String]) throws(VerificationError) -> Background {
            var settings = self
            for setting in Self.settings {
                guard let text = environment[setting.variable] else { continue }
                guard let value = Int64(text), setting.range.contains(value) else {
                    throw VerificationError(.invalidConfiguration, "\(setting.variable) must be an integer in"
                        + " \(setting.range.lowerBound)...\(setting.range.upperBound)")
                }
                settings[keyPath: setting.value] = value
            }
            return settings
        }
    }

    /// The server's certificate and key (PEM files; relative paths are relative to the gateway file's folder).
    public struct TLS: Sendable, Equatable {
        public enum Version: String, Sendable, Equatable { case tls12 = "1.2", tls13 = "1.3" }
        /// The server's certificate first, then any intermediates.
        public var certificateFile: URL
        /// Unencrypted: the gateway starts unattended.
        public var privateKeyFile: URL
        /// The oldest protocol version offered; TLS 1.2 unless set.
        public var minimumVersion = Version.tls12
    }

    public struct Limits: Sendable, Equatable {
        /// Largest HTTP request body accepted (a big legacy receipt is a few hundred KB of base64).
        public var maxBodyBytes: Int64 = 2 << 20
        /// Largest compact JWS accepted.
        public var maxJWSBytes: Int64 = 64 << 10
        /// Client connections open at once; past it new ones wait in the kernel's accept queue.
        public var maxConnections: Int64 = 1024
        /// Connections open at once from one client address, so one client cannot take them all;
        /// a connection past it is closed at once. 0: no per-address limit (behind a proxy).
        public var maxConnectionsPerClient: Int64 = 256
    }
}

struct GatewayConfigDecoder {
    let file: String
    let baseDirectory: URL

    func decode(_ tree: ConfigNode) throws(VerificationError) -> GatewayConfig {
        let o = try ConfigField(node: tree, file: file, path: "").object()
        var config = GatewayConfig(appsDirectory: baseDirectory.appendingPathComponent("apps"))
        if let f = o.optional("listenAddress") { config.listenAddress = try f.nonEmptyString() }
        // 0 asks the kernel for a free port (tests, the demo); the bound port is logged at start.
        if let f = o.optional("listenPort") { config.listenPort = Int(try f.integer(in: 0...65_535)) }
        if let f = o.optional("storageURL") {
            let url = try f.nonEmptyString()
            guard url.hasPrefix("sqlite:") || url.hasPrefix("postgresql://") || url.hasPrefix("postgres://") else {
                throw f.fail("must start with sqlite: or postgresql://")
            }
            // A password written here would sit in a file beside the policies: libpq takes it from
            // PGPASSWORD or a passfile instead, which an operator keeps with the other secrets.
            if !url.hasPrefix("sqlite:"), let authority = url.split(separator: "/", omittingEmptySubsequences: true).dropFirst().first,
               let userInfo = authority.split(separator: "@", maxSplits: 1).dropLast().first, userInfo.contains(":") {
                throw f.fail("must not hold a password: set PGPASSWORD or a passfile (PGPASSFILE) instead")
            }
            // libpq percent-decodes the URI's keywords as well as its values (and refuses a bad escape).
            guard let decoded = url.hasPrefix("sqlite:") ? url.lowercased() : url.removingPercentEncoding?.lowercased() else {
                throw f.fail("must not hold an invalid percent-encoding")
            }
            if url.lowercased().contains("password=") || decoded.contains("password=") {
                throw f.fail("must not hold a password: set PGPASSWORD or a passfile (PGPASSFILE) instead")
            }
            config.storage = LedgerStorage(url)
        }
        if let f = o.optional("upstream") {
            let u = try f.object()
            if let g = u.optional("verifyReceiptProduction") { config.upstream.verifyReceipt.production = try upstreamURL(g) }
            if let g = u.optional("verifyReceiptSandbox") { config.upstream.verifyReceipt.sandbox = try upstreamURL(g) }
            if let g = u.optional("serverAPIProduction") { config.upstream.serverAPI.production = try upstreamURL(g) }
            if let g = u.optional("serverAPISandbox") { config.upstream.serverAPI.sandbox = try upstreamURL(g) }
            try u.finish()
        }
        if let f = o.optional("timeouts") {
            let t = try f.object()
            if let g = t.optional("connectSeconds") { config.timeouts.connectSeconds = try g.integer(in: 1...300) }
            if let g = t.optional("requestSeconds") { config.timeouts.requestSeconds = try g.integer(in: 1...600) }
            if let g = t.optional("storageSeconds") { config.timeouts.storageSeconds = try g.integer(in: 1...60) }
            if let g = t.optional("budgetSeconds") { config.timeouts.budgetSeconds = try g.integer(in: 1...600) }
            try t.finish()
        }
        if let f = o.optional("limits") {
            let l = try f.object()
            if let g = l.optional("maxBodyBytes") { config.limits.maxBodyBytes = try g.integer(in: 1_024...(64 << 20)) }
            if let g = l.optional("maxJWSBytes") { config.limits.maxJWSBytes = try g.integer(in: 1_024...(16 << 20)) }
            if let g = l.optional("maxConnections") { config.limits.maxConnections = try g.integer(in: 1...65_536) }
            if let g = l.optional("maxConnectionsPerClient") {
                config.limits.maxConnectionsPerClient = try g.integer(in: 0...config.limits.maxConnections)
            }
            try l.finish()
        }
        if let f = o.optional("instanceId") {
            let id = try f.nonEmptyString()
            guard id.count <= 128, id.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value < 0x7F }) else {
                throw f.fail("must be 1-128 printable ASCII characters without spaces")
            }
            config.instanceId = id
        }
        if let f = o.optional("webhooks") {
            let w = try f.object()
            if let g = w.optional("leaseSeconds") { config.webhooks.leaseSeconds = try g.integer(in: 3...300) }
            if let g = w.optional("concurrency") { config.webhooks.concurrency = try g.integer(in: 1...256) }
            try w.finish()
        }
        if let f = o.optional("background") {
            let b = try f.object()
            for setting in GatewayConfig.Background.settings {
                if let g = b.optional(setting.key) { config.background[keyPath: setting.value] = try g.integer(in: setting.range) }
            }
            try b.finish()
        }
        if let f = o.optional("receiptSealKey") {
            config.receiptSealKey = try AppPolicyDecoder(file: file, baseDirectory: baseDirectory).decodeSecret(f, allowPrevious: false)
        }
        if let f = o.optional("appsDirectory") { config.appsDirectory = try path(f) }
        if let f = o.optional("tls") {
            let t = try f.object()
            var tls = GatewayConfig.TLS(certificateFile: try path(try t.required("certificateFile")),
                                        privateKeyFile: try path(try t.required("privateKeyFile")))
            if let g = t.optional("minimumVersion") { tls.minimumVersion = try g.oneOf([("1.2", .tls12), ("1.3", .tls13)]) }
            try t.finish()
            config.tls = tls
        }
        try o.finish()
        return config
    }

    /// Relative to the gateway file's folder, like the app policies' paths.
    private func path(_ field: ConfigField) throws(VerificationError) -> URL {
        let text = try field.nonEmptyString()
        return text.hasPrefix("/") ? URL(fileURLWithPath: text) : baseDirectory.appendingPathComponent(text)
    }

    /// HTTPS, except plain HTTP to this machine (the local App Store simulator).
    private func upstreamURL(_ field: ConfigField) throws(VerificationError) -> String {
        let text = try field.nonEmptyString()
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            throw field.fail("not an absolute URL")
        }
        let local = ["localhost", "127.0.0.1", "::1", "[::1]"].contains(host.lowercased())
        guard scheme == "https" || (scheme == "http" && local) else {
            throw field.fail("must be https (plain http only to localhost)")
        }
        return text
    }
}

/// One upstream's pair of URLs: Apple's production host and its sandbox host (or a simulator's).
/// verifyReceipt and the App Store Server API each have one.
public struct EnvironmentURLs: Sendable, Equatable {
    public var production: String
    public var sandbox: String

    /// Sandbox data goes to the sandbox host; everything else to production.
    public func url(for environment: AppStoreEnvironment) -> String {
        environment == .sandbox ? sandbox : production
    }
}
