import Foundation
import IAPCore
import Synchronization

/// The simulated App Store's memory. Every mutation happens inside one lock so a receipt built
/// right after an operation sees it; signing happens outside the lock on a snapshot.
final class SimulatorStore: Sendable {
    struct State: Sendable {
        var apps: [String: SimulatedApp] = [:]
        var transactions: [String: TransactionRecord] = [:]
        var chains: [String: SubscriptionChain] = [:]
        var notifications: [NotificationRecord] = []
        var consumptionRequests: [String: String] = [:]
        /// Every Finish Transaction call answered, in order (a transaction finished twice appears twice).
        var finishCalls: [FinishTransactionCall] = []
        var nextProductionId: Int64 = 1_000_000_100_000_001
        var nextSandboxId: Int64 = 2_000_000_100_000_001
        var nextWebOrderLineItemId: Int64 = 1_000_000_080_000_001
        var nextOrderNumber: Int64 = 1
        var sequence: Int64 = 0
        var appTransactionIds: [String: String] = [:]
        /// The paid download of the app itself, by the same key as `appTransactionIds` (what an
        /// AppTransaction and a receipt's original_application_version state); absent: "1.0", now.
        var appPurchases: [String: AppPurchase] = [:]
        /// Planted discrepancies by transactionId (see PlantedDiscrepancies.swift).
        var plants: [String: PlantRecord] = [:]
        var plantOrder: Int64 = 0

        mutating func newTransactionId(_ environment: AppStoreEnvironment) -> String {
            if environment == .sandbox {
                defer { nextSandboxId += 1 }
                return String(nextSandboxId)
            }
            defer { nextProductionId += 1 }
            return String(nextProductionId)
        }

        mutating func newOrderId() -> String {
            defer { nextOrderNumber += 1 }
            return "MSIM" + String(nextOrderNumber + 100_000)
        }

        mutating func nextSequence() -> Int64 { sequence += 1; return sequence }

        /// Stores a new or changed transaction, stamped with the next sequence (the revision the
        /// history and refund lookups page by).
        mutating func save(_ t: inout TransactionRecord) {
            t.modifiedSequence = nextSequence()
            transactions[t.transactionId] = t
        }

        mutating func appTransactionId(owner: String, bundleId: String, environment: AppStoreEnvironment) -> String {
            let key = "\(environment.rawValue)|\(bundleId)|\(owner)"
            if let id = appTransactionIds[key] { return id }
            let id = newTransactionId(environment)
            appTransactionIds[key] = id
            return id
        }
    }

    let state = Mutex(State())
    let now: @Sendable () -> Date

    init(now: @escaping @Sendable () -> Date) { self.now = now }

    var nowMs: Int64 { Int64((now().timeIntervalSince1970 * 1000).rounded(.down)) }

    func register(_ app: SimulatedApp) { state.withLock { $0.apps[app.bundleId] = app } }
    func app(_ bundleId: String) -> SimulatedApp? { state.withLock { $0.apps[bundleId] } }
    func app(keyId: String) -> SimulatedApp? { state.withLock { s in s.apps.values.first { $0.keyId == keyId } } }
    func transaction(_ id: String) -> TransactionRecord? { state.withLock { $0.transactions[id] } }
    func chain(_ originalTransactionId: String) -> SubscriptionChain? { state.withLock { $0.chains[originalTransactionId] } }

    /// Every transaction of one owner in one app and environment, oldest purchase first.
    func transactions(owner: String, bundleId: String, environment: AppStoreEnvironment) -> [TransactionRecord] {
        state.withLock { s in
            s.transactions.values.filter { $0.owner == owner && $0.bundleId == bundleId && $0.environment == environment }
        }.sorted { ($0.purchaseDate, $0.transactionId) < ($1.purchaseDate, $1.transactionId) }
    }

    func chains(owner: String, bundleId: String, environment: AppStoreEnvironment) -> [SubscriptionChain] {
        state.withLock { s in
            s.chains.values.filter { $0.owner == owner && $0.bundleId == bundleId && $0.environment == environment }
        }.sorted { $0.originalTransactionId < $1.originalTransactionId }
    }

    func purchase(_ r: PurchaseRequest) throws(SimulatorError) -> TransactionRecord {
        let at = r.purchaseDate.map { Int64(($0.timeIntervalSince1970 * 1000).rounded(.down)) } ?? nowMs
        let result: Result<TransactionRecord, SimulatorError> = state.withLock { s in
            guard s.apps[r.bundleId] != nil else { return .failure(SimulatorError("unknown app \(r.bundleId)")) }
            guard r.environment == .production || r.environment == .sandbox else {
                return .failure(SimulatorError("environment must be Production or Sandbox"))
            }
            let isSubscription = r.type == .autoRenewable || r.type == .nonRenewing
            if r.type == .autoRenewable && r.subscriptionGroupIdentifier == nil {
                return .failure(SimulatorError("an auto-renewable purchase needs a subscriptionGroupIdentifier"))
            }
            let id = s.newTransactionId(r.environment)
            let webOrder: String? = r.type == .autoRenewable ? String(s.nextWebOrderLineItemId) : nil
            if webOrder != nil { s.nextWebOrderLineItemId += 1 }
            let record = TransactionRecord(
                transactionId: id, originalTransactionId: id, webOrderLineItemId: webOrder, bundleId: r.bundleId,
                productId: r.productId, subscriptionGroupIdentifier: r.type == .autoRenewable ? r.subscriptionGroupIdentifier : nil,
                purchaseDate: at, originalPurchaseDate: at,
                expiresDate: isSubscription ? at + r.periodSeconds * 1000 : nil, quantity: r.quantity, type: r.type,
                appAccountToken: r.appAccountToken, ownership: r.familyShared ? .familyShared : .purchased,
                revocationDate: nil, revocationReason: nil, revocationType: nil, revocationPercentage: nil,
                commitment: r.type == .autoRenewable ? r.commitmentPeriods.map { periods in
                    SimulatedCommitment(billingPeriodNumber: 1, totalBillingPeriods: periods,
                                        commitmentExpiresDate: at + periods * r.periodSeconds * 1000, commitmentPrice: periods * r.price)
                } : nil,
                isUpgraded: false, offer: r.offer, environment: r.environment,
                transactionReason: .purchase, storefront: r.storefront, storefrontId: r.storefrontId,
                price: r.offer == .freeTrial ? 0 : r.price, currency: r.currency, owner: r.owner,
                appTransactionId: s.appTransactionId(owner: r.owner, bundleId: r.bundleId, environment: r.environment),
                orderId: s.newOrderId(), modifiedSequence: s.nextSequence())
            s.transactions[id] = record
            if r.type == .autoRenewable, let group = r.subscriptionGroupIdentifier {
                s.chains[id] = SubscriptionChain(
                    originalTransactionId: id, bundleId: r.bundleId, owner: r.owner, environment: r.environment,
                    subscriptionGroupIdentifier: group, periodSeconds: r.periodSeconds, autoRenewProductId: r.productId,
                    price: r.price, currency: r.currency, latestTransactionId: id)
            }
            return .success(record)
        }
        return try result.get()
    }

    /// A new transaction in the chain, starting where the latest one ends (or now, if it lapsed).
    func renew(originalTransactionId: String, productId: String? = nil, upgrade: Bool = false) throws(SimulatorError) -> TransactionRecord {
        let at = nowMs
        let result: Result<TransactionRecord, SimulatorError> = state.withLock { s in
            guard var chain = s.chains[originalTransactionId], var latest = s.transactions[chain.latestTransactionId] else {
                return .failure(SimulatorError("no auto-renewable subscription \(originalTransactionId)"))
            }
            let start: Int64
            if upgrade {
                // An upgrade takes effect at once; the replaced period is cancelled and marked upgraded.
                // Never before the replaced period's start (renewals are compressed into the present).
                start = max(at, latest.purchaseDate)
                latest.isUpgraded = true
                latest.revocationDate = at
                s.save(&latest)
            } else {
                start = max(latest.expiresDate ?? at, at)
            }
            let id = s.newTransactionId(chain.environment)
            let webOrder = String(s.nextWebOrderLineItemId)
            s.nextWebOrderLineItemId += 1
            var next = latest
            next.transactionId = id
            next.webOrderLineItemId = webOrder
            next.productId = productId ?? chain.autoRenewProductId
            next.purchaseDate = start
            next.expiresDate = start + chain.periodSeconds * 1000
            next.clearRevocation()
            // The next month of a commitment; past its last month a new commitment starts.
            next.commitment = latest.commitment.map { c in
                c.billingPeriodNumber < c.totalBillingPeriods
                    ? SimulatedCommitment(billingPeriodNumber: c.billingPeriodNumber + 1, totalBillingPeriods: c.totalBillingPeriods,
                                          commitmentExpiresDate: c.commitmentExpiresDate, commitmentPrice: c.commitmentPrice)
                    : SimulatedCommitment(billingPeriodNumber: 1, totalBillingPeriods: c.totalBillingPeriods,
                                          commitmentExpiresDate: start + c.totalBillingPeriods * chain.periodSeconds * 1000,
                                          commitmentPrice: c.commitmentPrice)
            }
            next.isUpgraded = false
            next.offer = nil
            next.price = chain.price
            next.transactionReason = upgrade ? .purchase : .renewal
            next.orderId = s.newOrderId()
            s.save(&next)
            chain.latestTransactionId = id
            chain.autoRenewProductId = next.productId
            chain.autoRenewStatus = 1
            chain.expirationIntent = nil
            chain.isInBillingRetryPeriod = false
            chain.gracePeriodExpiresDate = nil
            s.chains[originalTransactionId] = chain
            return .success(next)
        }
        return try result.get()
    }

    /// Ends the subscription now: the latest period's expiry moves into the past, auto-renew turns off.
    func expire(originalTransactionId: String, intent: Int64, billingRetry: Bool,
                gracePeriodSeconds: Int64? = nil) throws(SimulatorError) -> TransactionRecord {
        let at = nowMs
        let result: Result<TransactionRecord, SimulatorError> = state.withLock { s in
            guard var chain = s.chains[originalTransactionId], var latest = s.transactions[chain.latestTransactionId] else {
                return .failure(SimulatorError("no auto-renewable subscription \(originalTransactionId)"))
            }
            // A renewal period that starts later (renewals are compressed into the present) keeps
            // its dates: it lapses at its own end. Pulling its expiry before its start would let a
            // later recovery start before the failed period, which no real chain does.
            if let e = latest.expiresDate, e >= at, latest.purchaseDate <= at { latest.expiresDate = at - 1000 }
            s.save(&latest)
            chain.autoRenewStatus = billingRetry ? 1 : 0
            chain.expirationIntent = intent
            chain.isInBillingRetryPeriod = billingRetry
            chain.gracePeriodExpiresDate = billingRetry ? gracePeriodSeconds.map { at + $0 * 1000 } : nil
            s.chains[originalTransactionId] = chain
            return .success(latest)
        }
        return try result.get()
    }

    /// Refund (reason 0 other, 1 app issue) or family-sharing revoke: sets revocationDate now.
    func revoke(transactionId: String, reason: Int64?, type: RevocationType, percentage: Int64? = nil) throws(SimulatorError) -> TransactionRecord {
        let at = nowMs
        let result: Result<TransactionRecord, SimulatorError> = state.withLock { s in
            guard var t = s.transactions[transactionId] else { return .failure(SimulatorError("no transaction \(transactionId)")) }
            t.revocationDate = at
            t.revocationReason = reason
            t.revocationType = type
            t.revocationPercentage = percentage
            s.save(&t)
            if var chain = s.chains[t.originalTransactionId], chain.latestTransactionId == transactionId {
                chain.autoRenewStatus = 0
                s.chains[t.originalTransactionId] = chain
            }
            return .success(t)
        }
        return try result.get()
    }

    /// Apple reverses a refund by removing the revocation fields from the transaction.
    func reverseRefund(transactionId: String) throws(SimulatorError) -> TransactionRecord {
        let result: Result<TransactionRecord, SimulatorError> = state.withLock { s in
            guard var t = s.transactions[transactionId], t.revocationDate != nil else {
                return .failure(SimulatorError("no refunded transaction \(transactionId)"))
            }
            t.clearRevocation()
            s.save(&t)
            return .success(t)
        }
        return try result.get()
    }

    /// The customer's renewal preference: auto-renew on/off, or the product of the next period
    /// (a downgrade or crossgrade, which Apple applies at the next renewal).
    func changeRenewalPreference(originalTransactionId: String, autoRenew: Bool?, productId: String?)
        throws(SimulatorError) -> TransactionRecord {
        let result: Result<TransactionRecord, SimulatorError> = state.withLock { s in
            guard var chain = s.chains[originalTransactionId], let latest = s.transactions[chain.latestTransactionId] else {
                return .failure(SimulatorError("no auto-renewable subscription \(originalTransactionId)"))
            }
            if let autoRenew { chain.autoRenewStatus = autoRenew ? 1 : 0 }
            if let productId { chain.autoRenewProductId = productId }
            s.chains[originalTransactionId] = chain
            return .success(latest)
        }
        return try result.get()
    }

    /// Latest transaction of a chain, or the transaction itself for one-time purchases.
    func latestTransactionId(for originalTransactionId: String) -> String? {
        state.withLock { s in
            s.chains[originalTransactionId]?.latestTransactionId ?? s.transactions[originalTransactionId]?.transactionId
        }
    }

    /// Records the owner's download of the app (version and date) and answers its appTransactionId.
    func setAppPurchase(_ purchase: AppPurchase, owner: String, bundleId: String, environment: AppStoreEnvironment) -> String {
        state.withLock { s in
            let id = s.appTransactionId(owner: owner, bundleId: bundleId, environment: environment)
            s.appPurchases["\(environment.rawValue)|\(bundleId)|\(owner)"] = purchase
            return id
        }
    }

    func appPurchase(owner: String, bundleId: String, environment: AppStoreEnvironment) -> AppPurchase? {
        state.withLock { $0.appPurchases["\(environment.rawValue)|\(bundleId)|\(owner)"] }
    }

    /// The owner whose app download (or any purchase) has this id: an appTransactionId, a
    /// transactionId or an originalTransactionId, as Get App Transaction Info accepts.
    func appOwner(anyTransactionId id: String, bundleId: String, environment: AppStoreEnvironment) -> String? {
        state.withLock { s in
            let prefix = "\(environment.rawValue)|\(bundleId)|"
            if let key = s.appTransactionIds.first(where: { $0.value == id && $0.key.hasPrefix(prefix) })?.key {
                return String(key.dropFirst(prefix.count))
            }
            guard let t = s.transactions[id], t.bundleId == bundleId, t.environment == environment else { return nil }
            return t.owner
        }
    }

    func recordFinish(_ call: FinishTransactionCall) { state.withLock { $0.finishCalls.append(call) } }
    var finishCalls: [FinishTransactionCall] { state.withLock { $0.finishCalls } }

    func setAppAccountToken(_ token: String, originalTransactionId: String) -> Bool {
        state.withLock { s in
            let ids = s.transactions.values.filter { $0.originalTransactionId == originalTransactionId }.map(\.transactionId)
            guard !ids.isEmpty else { return false }
            for id in ids {
                s.transactions[id]?.appAccountToken = token
                let sequence = s.nextSequence()
                s.transactions[id]?.modifiedSequence = sequence
            }
            return true
        }
    }

    func record(notification: NotificationRecord) { state.withLock { $0.notifications.append(notification) } }
    func notifications(bundleId: String, environment: AppStoreEnvironment) -> [NotificationRecord] {
        state.withLock { s in s.notifications.filter { $0.bundleId == bundleId && $0.environment == environment } }
    }
}
