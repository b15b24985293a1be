import Adapters
import AppleTrust
import Foundation
import IAPConfig
import IAPCore
import Ledger
import Synchronization

/// Brings the inbox back in line with Apple when notifications were lost or never sent. Per app:
/// - with Server API credentials: Get Notification History (paged) from the last pass's end (or a
///   window) re-delivers every notification through the same decoder into the inbox, where the
///   ones already held are no-ops; then Get All Subscription Statuses re-reads chains near expiry,
///   past it, or in billing retry, as GATEWAY_RECONCILED_STATUS events;
/// - legacy only (no credentials): each stored latest receipt is re-verified through verifyReceipt
///   and its chains' facts enqueued as GATEWAY_RECONCILED_STATUS events.
/// Nothing is applied here: the inbox worker runs everything through the one state machine, which
/// ignores what is older than the state. Consumption requests due an answer are answered last.
/// One pass at a time: per process, and across instances sharing a database through the ledger's
/// `reconciliation` lease, renewed while the pass runs (a second caller gets nil).
public final class Reconciler: Sendable {
    public struct Options: Sendable {
        /// How far back the first pass (with no high-water mark) reads notification history.
        public var historyWindowMillis: Int64 = 24 * 3_600_000
        /// Re-read from this long before the last pass's end: Apple's history may lag a little.
        public var historyOverlapMillis: Int64 = 10 * 60_000
        /// Chains whose stored end date is before now + this are re-read.
        public var expiryHorizonMillis: Int64 = 3_600_000
        public var maxChainsPerApp = 500
        public var maxHistoryPages = 50
        /// How long the cross-instance lease lasts without renewal (a crashed holder's runs out).
        public var leaseMillis: Int64 = 5 * 60_000
        public init() {}
    }

    public let apps: [String: AppPolicy]
    let ledger: any NotificationLedger & ReconciliationLedger & Ledger
    let decoder: NotificationDecoder
    let serverAPI: (any ReconciliationSource)?
    let legacy: (any ReceiptReverifying)?
    let sealer: AESGCMSealer?
    let consumption: ConsumptionResponder
    let options: Options
    let logger: Logger
    let now: @Sendable () -> Int64
    private let running = Mutex(false)
    /// Who holds the lease: the instance's stable identity (`WorkerIdentity`), so a restarted instance
    /// takes back at once the lease its previous incarnation held; else one id per reconciler. Two
    /// live processes never share it.
    let leaseHolder: String
    static let leaseName = "reconciliation"
    /// Per app and environment: the end of the last history window read completely.
    private let highWater = Mutex<[String: Int64]>([:])

    public init(apps: [String: AppPolicy], ledger: any NotificationLedger & ReconciliationLedger & Ledger,
                decoder: NotificationDecoder, serverAPI: (any ReconciliationSource)?, legacy: (any ReceiptReverifying)?,
                sealer: AESGCMSealer?, options: Options = Options(), identity: WorkerIdentity = .ephemeral(),
                logger: Logger = .disabled, now: @escaping @Sendable () -> Int64) {
        self.apps = apps
        leaseHolder = identity.id
        self.ledger = ledger
        self.decoder = decoder
        self.serverAPI = serverAPI
        self.legacy = legacy
        self.sealer = sealer
        self.options = options
        self.logger = logger
        self.now = now
        self.consumption = ConsumptionResponder(apps: apps, ledger: ledger, serverAPI: serverAPI, logger: logger, now: now)
    }

    /// One pass over every app. `since` overrides where history reading starts. Nil when a pass
    /// is already running in this process.
    public func reconcile(since: Int64? = nil) async -> ReconciliationReport? {
        guard running.withLock({ (busy: inout Bool) -> Bool in
            if busy { return false }
            busy = true
            return true
        }) else { return nil }
        defer { running.withLock { $0 = false } }
        guard await takeLease() else {
            logger.info("reconciliation_skipped", ["reason": "another instance holds the lease"])
            return nil
        }
        // Renewal and release take turns: the release waits for the heartbeat to end (a renewal in
        // flight lands first), so a renewal never lands after the release (which would keep other
        // instances out for a whole lease); a lost lease ends the pass at the next app, before
        // anything else is asked of Apple or answered to it.
        let lost = LeaseLost()
        let heartbeat = Task { [self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(max(options.leaseMillis / 3, 1)))
                guard !Task.isCancelled else { return }
                if !(await takeLease()) {
                    lost.flag.store(true, ordering: .relaxed)
                    logger.error("reconciliation_lease_lost", [:])
                    return
                }
            }
        }
        let report = await pass(since: since, stillHeld: { !lost.flag.load(ordering: .relaxed) })
        heartbeat.cancel()
        await heartbeat.value
        do throws(VerificationError) { try await ledger.releaseLease(Self.leaseName, holder: leaseHolder) } catch {
            logger.warning("reconciliation_lease_release_failed", ["code": error.code.rawValue])
        }
        return report
    }

    private func pass(since: Int64?, stillHeld: () -> Bool) async -> ReconciliationReport {
        var report = ReconciliationReport()
        for app in apps.values.sorted(by: { $0.bundleId < $1.bundleId }) {
            guard stillHeld() else { break }
            if app.serverAPI != nil, let serverAPI {
                await readHistory(app, serverAPI: serverAPI, since: since, into: &report)
                await readStatuses(app, serverAPI: serverAPI, into: &report)
            } else if app.sharedSecret != nil, legacy != nil, sealer != nil {
                await reverifyReceipts(app, into: &report)
            }
        }
        guard stillHeld() else {
            logger.warning("reconciliation_pass_abandoned", ["reason": "lease lost"])
            return report
        }
        report.consumptionAnswered = await consumption.answerPending(failures: &report.failures)
        logger.info("reconciliation_pass", ["historyEnqueued": String(report.historyEnqueued),
                                            "statusEventsEnqueued": String(report.statusEventsEnqueued),
                                            "receiptEventsEnqueued": String(report.receiptEventsEnqueued),
                                            "consumptionAnswered": String(report.consumptionAnswered),
                                            "failures": String(report.failures.count)])
        return report
    }

    private final class LeaseLost: Sendable {
        let flag = Atomic<Bool>(false)
    }

    /// Takes or renews the cross-instance lease; a storage failure counts as not holding it.
    private func takeLease() async -> Bool {
        do {
            return try await ledger.acquireLease(Self.leaseName, holder: leaseHolder, now: now(), ttlMillis: options.leaseMillis)
        } catch {
            logger.error("reconciliation_lease_failed", ["code": error.code.rawValue])
            return false
        }
    }

    // MARK: Get Notification History

    /// The App Store servers some notification of the app may come from (its identity for Apple's own messages).
    static func environments(_ app: AppPolicy) -> [ServerAPIEnvironment] {
        let identity = app.identity(for: .apple)
        return [ServerAPIEnvironment.production, .sandbox].filter { identity.environments.contains($0.appStoreEnvironment) }
    }

    private func readHistory(_ app: AppPolicy, serverAPI: any ReconciliationSource, since: Int64?,
                             into report: inout ReconciliationReport) async {
        let client: AppStoreServerAPIClient
        do { client = try serverAPI.client(for: app) } catch {
            return report.fail(app.bundleId, "history", error)
        }
        for environment in Self.environments(app) {
            let key = "\(app.bundleId)\u{0}\(environment.rawValue)"
            // Apple's endDate is exclusive: a notification signed this millisecond is included.
            let end = now() + 1
            // Apple keeps 180 days of history.
            let oldest = end - 180 * 86_400_000
            let mark = highWater.withLock { $0[key] }.map { $0 - options.historyOverlapMillis }
            let start = max(since ?? mark ?? (end - options.historyWindowMillis), oldest)
            guard start < end else { continue }
            var token: String?
            var complete = false
            do throws(VerificationError) {
                for _ in 0..<options.maxHistoryPages {
                    let page = try await client.getNotificationHistory(startDate: start, endDate: end, paginationToken: token,
                                                                       environment: environment)
                    for item in page.notificationHistory { await enqueueHistory(item.signedPayload, app: app, into: &report) }
                    guard page.hasMore else { complete = true; break }
                    guard let next = page.paginationToken, next != token else {
                        throw VerificationError(.upstreamUnavailable, "notification history: hasMore without a new paginationToken")
                    }
                    token = next
                }
            } catch {
                report.fail(app.bundleId, "history", error)
            }
            // Only a window read to its end moves the mark; otherwise the next pass reads it again.
            if complete { highWater.withLock { $0[key] = end } }
        }
    }

    private func enqueueHistory(_ signedPayload: String, app: AppPolicy, into report: inout ReconciliationReport) async {
        report.historyRead += 1
        let body = Array(JSONValue.object(["signedPayload": .string(signedPayload)]).jsonText.utf8)
        do throws(VerificationError) {
            let decoded = try await decoder.decodeCheckingOnline(body: body, app: app)
            let fresh = try await ledger.enqueue(InboxEntry(
                id: decoded.id, bundleId: app.bundleId, version: decoded.version,
                notificationType: decoded.notificationType.rawValue, subtype: decoded.subtype?.rawValue,
                signedDate: decoded.signedDate, environment: decoded.environment.rawValue, receivedAt: now(),
                rawBody: Data(body), event: decoded.event))
            if fresh { report.historyEnqueued += 1 }
        } catch {
            // A payload that does not verify is refused exactly as on the notification route.
            report.historyRefused += 1
            logger.warning("reconciliation_history_refused", ["bundleId": app.bundleId, "code": error.code.rawValue])
        }
    }

    // MARK: Get All Subscription Statuses

    private func readStatuses(_ app: AppPolicy, serverAPI: any ReconciliationSource, into report: inout ReconciliationReport) async {
        let chains: [String]
        let client: AppStoreServerAPIClient
        do throws(VerificationError) {
            client = try serverAPI.client(for: app)
            chains = try await ledger.chainsToReconcile(bundleId: app.bundleId, expiringBefore: now() + options.expiryHorizonMillis,
                                                  limit: options.maxChainsPerApp)
        } catch {
            return report.fail(app.bundleId, "statuses", error)
        }
        // One answer covers every subscription of the customer: a chain already seen needs no call.
        var seen = Set<String>()
        for chain in chains where !seen.contains(chain) {
            do throws(VerificationError) {
                let order = try await statusOrder(app, chain: chain)
                let answer = try await client.getAllSubscriptionStatuses(transactionId: chain, order: order)
                report.statusChainsRead += 1
                for item in answer.data.flatMap(\.lastTransactions) where seen.insert(item.originalTransactionId).inserted {
                    let (transaction, renewal) = try await serverAPI.verifiedStatus(item, app: app)
                    let signedDate = max(transaction.signedDate ?? 0, renewal?.signedDate ?? 0)
                    let raw = JSONValue.object([
                        "originalTransactionId": .string(item.originalTransactionId),
                        "signedTransactionInfo": .string(item.signedTransactionInfo),
                        "signedRenewalInfo": item.signedRenewalInfo.map(JSONValue.string) ?? .null,
                    ])
                    if try await enqueueReconciled(app: app, chain: item.originalTransactionId, signedDate: signedDate,
                                             transaction: transaction, renewal: renewal, version: "2",
                                             rawBody: Data(raw.jsonText.utf8)) {
                        report.statusEventsEnqueued += 1
                    }
                }
            } catch {
                report.fail(app.bundleId, "statuses", error)
            }
        }
    }

    /// Where the chain was seen (its stored environment), else every host the app may use.
    private func statusOrder(_ app: AppPolicy, chain: String) async throws(VerificationError) -> ServerAPIEnvironmentOrder {
        if let environment = try await ledger.subscriptionState(bundleId: app.bundleId, originalTransactionId: chain)?.environment {
            if environment == .production { return .productionOnly }
            if environment == .sandbox { return .sandboxOnly }
        }
        let environments = Self.environments(app)
        switch (environments.contains(.production), environments.contains(.sandbox)) {
        case (true, true): return .productionThenSandbox
        case (false, true): return .sandboxOnly
        default: return .productionOnly
        }
    }

    /// One reconciled fact as a GATEWAY_RECONCILED_STATUS inbox entry. The id is a function of the
    /// chain and the fact's date, so reading the same answer twice enqueues it once.
    func enqueueReconciled(app: AppPolicy, chain: String, signedDate: Int64, transaction: CanonicalTransaction,
                           renewal: CanonicalRenewal?, version: String, rawBody: Data) async throws(VerificationError) -> Bool {
        guard let environment = transaction.environment else {
            throw VerificationError(.missingField, "a reconciled transaction names no environment")
        }
        let event = LifecycleEvent(id: "reconcile:\(chain):\(signedDate)", bundleId: app.bundleId,
                                   notificationType: SubscriptionLifecycle.reconciledStatus, subtype: nil,
                                   signedDate: signedDate, environment: environment, transaction: transaction,
                                   renewal: renewal)
        return try await ledger.enqueue(InboxEntry(
            id: event.id, bundleId: app.bundleId, version: version, notificationType: event.notificationType.rawValue,
            subtype: nil, signedDate: signedDate, environment: environment.rawValue, receivedAt: now(),
            rawBody: rawBody, event: event))
    }
}
