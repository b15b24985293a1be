import Foundation
import IAPCore

/// One of the simulator's two generations of answers about the same purchases.
public enum SimulatorGeneration: String, Sendable, Hashable, CaseIterable {
    /// verifyReceipt's JSON (`receipt.in_app`, `latest_receipt_info`).
    case legacy
    /// The App Store Server API's signed transactions (Get Transaction Info, Get Transaction
    /// History, Get All Subscription Statuses, order and refund lookups).
    case serverAPI

    public var other: SimulatorGeneration { self == .legacy ? .serverAPI : .legacy }
}

/// A disagreement deliberately planted between the two generations for one transaction, so a
/// migration comparison can be proved to find exactly the planted ones. Each changes what ONE
/// generation answers; the other, and the PKCS#7 receipt the app sends (which always lists the
/// transaction), keep the store's truth.
public enum PlantedDiscrepancy: Sendable, Hashable {
    /// `side` shows the transaction refunded (revocation date = when planted, reason 0); the other does not.
    case refundOnlyIn(SimulatorGeneration)
    /// `side` shows `expiresDate` moved by `offsetSeconds` (non-zero; subscriptions only).
    case differentExpiresDate(SimulatorGeneration, offsetSeconds: Int64)
    /// `side` names `productId` instead of the purchased product.
    case differentProduct(SimulatorGeneration, productId: String)
    /// verifyReceipt lists the transaction; the Server API omits it from history, statuses and
    /// lookups, and Get Transaction Info answers 404 4040010.
    case onlyInLegacy
    /// The Server API has the transaction; verifyReceipt's JSON omits it (the receipt still lists it).
    case onlyInServerAPI

    public static var refundOnlyInLegacy: PlantedDiscrepancy { .refundOnlyIn(.legacy) }
    public static var refundOnlyInServerAPI: PlantedDiscrepancy { .refundOnlyIn(.serverAPI) }

    /// The generation whose answer this discrepancy changes.
    public var changedGeneration: SimulatorGeneration {
        switch self {
        case .refundOnlyIn(let s), .differentExpiresDate(let s, _), .differentProduct(let s, _): s
        case .onlyInLegacy: .serverAPI
        case .onlyInServerAPI: .legacy
        }
    }

    /// The canonical field the discrepancy changes; nil when the whole transaction is missing on one side.
    public var canonicalField: String? {
        switch self {
        case .refundOnlyIn: "revocationDate"
        case .differentExpiresDate: "expiresDate"
        case .differentProduct: "productId"
        case .onlyInLegacy, .onlyInServerAPI: nil
        }
    }

    // MARK: JSON (the admin route's body)

    /// `{"kind": "refund"|"expiresDate"|"product"|"onlyInLegacy"|"onlyInServerAPI",
    ///   "side": "legacy"|"serverAPI", "offsetSeconds": N, "productId": "..."}`.
    public init(json: JSONValue) throws {
        guard let object = json.objectValue else { throw SimulatorError("a planted discrepancy is a JSON object") }
        let f = JSONFields(object, context: "plant")
        func side() throws -> SimulatorGeneration {
            let raw = try f.requiredString("side")
            guard let s = SimulatorGeneration(rawValue: raw) else { throw SimulatorError("side is legacy or serverAPI") }
            return s
        }
        switch try f.requiredString("kind") {
        case "refund": self = .refundOnlyIn(try side())
        case "expiresDate": self = .differentExpiresDate(try side(), offsetSeconds: try f.requiredInt64("offsetSeconds"))
        case "product": self = .differentProduct(try side(), productId: try f.requiredString("productId"))
        case "onlyInLegacy": self = .onlyInLegacy
        case "onlyInServerAPI": self = .onlyInServerAPI
        default: throw SimulatorError("kind is refund, expiresDate, product, onlyInLegacy or onlyInServerAPI")
        }
    }

    public var json: JSONValue {
        switch self {
        case .refundOnlyIn(let s):
            .object(["kind": .string("refund"), "side": .string(s.rawValue)])
        case .differentExpiresDate(let s, let offset):
            .object(["kind": .string("expiresDate"), "side": .string(s.rawValue), "offsetSeconds": .int(offset)])
        case .differentProduct(let s, let p):
            .object(["kind": .string("product"), "side": .string(s.rawValue), "productId": .string(p)])
        case .onlyInLegacy: .object(["kind": .string("onlyInLegacy")])
        case .onlyInServerAPI: .object(["kind": .string("onlyInServerAPI")])
        }
    }
}

/// A planted discrepancy and the transaction it sits on.
public struct PlantedTransaction: Sendable, Hashable {
    public let transactionId: String
    public let discrepancy: PlantedDiscrepancy
    public let bundleId: String
    /// The product the store really sold (before any `differentProduct`).
    public let productId: String
}

/// What the store keeps per plant: the discrepancy, in planting order, with the refund date fixed
/// when planted so every answer repeats the same value.
struct PlantRecord: Sendable {
    var discrepancy: PlantedDiscrepancy
    var plantedAt: Int64
    var order: Int64

    /// `t` as `generation` answers it; nil when that generation omits it.
    func apply(to t: TransactionRecord, as generation: SimulatorGeneration) -> TransactionRecord? {
        var t = t
        switch discrepancy {
        case .refundOnlyIn(let side) where side == generation:
            t.revocationDate = plantedAt
            t.revocationReason = 0
        case .differentExpiresDate(let side, let offset) where side == generation:
            t.expiresDate = t.expiresDate.map { $0 + offset * 1000 }
        case .differentProduct(let side, let productId) where side == generation:
            t.productId = productId
        case .onlyInLegacy where generation == .serverAPI, .onlyInServerAPI where generation == .legacy:
            return nil
        default:
            break
        }
        return t
    }
}

extension SimulatorStore {
    /// Plants (or replaces) the one discrepancy of a transaction, refusing plants that would not
    /// make the two generations differ.
    func plant(_ d: PlantedDiscrepancy, transactionId: String) throws(SimulatorError) {
        let at = nowMs
        let failure: SimulatorError? = state.withLock { s in
            guard let t = s.transactions[transactionId] else { return SimulatorError("no transaction \(transactionId)") }
            switch d {
            case .refundOnlyIn where t.revocationDate != nil:
                return SimulatorError("transaction \(transactionId) is already refunded in both generations")
            case .differentExpiresDate(_, let offset) where t.expiresDate == nil || offset == 0:
                return SimulatorError("differentExpiresDate needs a transaction with an expiresDate and a non-zero offset")
            case .differentProduct(_, let p) where p.isEmpty || p == t.productId:
                return SimulatorError("differentProduct needs a product other than \(t.productId)")
            default:
                break
            }
            s.plantOrder += 1
            s.plants[transactionId] = PlantRecord(discrepancy: d, plantedAt: at, order: s.plantOrder)
            return nil
        }
        if let failure { throw failure }
    }

    @discardableResult
    func removePlant(transactionId: String) -> Bool { state.withLock { $0.plants.removeValue(forKey: transactionId) != nil } }
    func removeAllPlants() { state.withLock { $0.plants.removeAll() } }

    var plantedTransactions: [PlantedTransaction] {
        state.withLock { s in
            s.plants.sorted { $0.value.order < $1.value.order }.compactMap { id, plant in
                s.transactions[id].map {
                    PlantedTransaction(transactionId: id, discrepancy: plant.discrepancy, bundleId: $0.bundleId,
                                       productId: $0.productId)
                }
            }
        }
    }

    /// The transactions as `generation` answers them, in the same order, omitted ones dropped.
    func served(_ transactions: [TransactionRecord], as generation: SimulatorGeneration) -> [TransactionRecord] {
        let plants = state.withLock { $0.plants }
        if plants.isEmpty { return transactions }
        return transactions.compactMap { t in plants[t.transactionId].map { $0.apply(to: t, as: generation) } ?? t }
    }

    func served(_ t: TransactionRecord, as generation: SimulatorGeneration) -> TransactionRecord? {
        served([t], as: generation).first
    }
}

extension AppStoreSimulator {
    // MARK: Planted discrepancies

    /// Makes one generation answer differently for `transactionId` (replacing any earlier plant on
    /// it). Throws SimulatorError for an unknown transaction or a plant that would change nothing.
    public func plant(_ discrepancy: PlantedDiscrepancy, transactionId: String) throws {
        try store.plant(discrepancy, transactionId: transactionId)
    }

    /// Every plant, in planting order.
    public var plantedDiscrepancies: [PlantedTransaction] { store.plantedTransactions }

    /// Both generations agree again for this transaction; false if nothing was planted on it.
    @discardableResult
    public func removePlant(transactionId: String) -> Bool { store.removePlant(transactionId: transactionId) }

    public func removeAllPlants() { store.removeAllPlants() }

    // MARK: Bulk purchases

    /// `count` purchases with no plants, each by its own owner (`{ownerPrefix}-{i}`, so each has its
    /// own receipt): two of three are monthly auto-renewable subscriptions
    /// (`{bundleId}.monthly`, group 21000001), one of three a non-consumable (`{bundleId}.pro`).
    public func makeConsistentPurchases(count: Int, bundleId: String, ownerPrefix: String = "owner",
                                        environment: AppStoreEnvironment = .production) throws -> [SimulatedPurchase] {
        var out: [SimulatedPurchase] = []
        out.reserveCapacity(max(0, count))
        for i in 0..<max(0, count) {
            let owner = "\(ownerPrefix)-\(i)"
            let request = i % 3 == 2
                ? PurchaseRequest(bundleId: bundleId, productId: "\(bundleId).pro", type: .nonConsumable, owner: owner,
                                  environment: environment)
                : PurchaseRequest(bundleId: bundleId, productId: "\(bundleId).monthly", type: .autoRenewable, owner: owner,
                                  environment: environment, subscriptionGroupIdentifier: "21000001")
            out.append(try purchase(request))
        }
        return out
    }
}
