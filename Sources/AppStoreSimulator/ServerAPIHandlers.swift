import Foundation
import HTTPServer
import IAPCore

/// App Store Server API routes under an environment prefix. Every call needs a valid JWT; a
/// transaction of the other environment (or another app) is 404 4040010, as at Apple.
extension AppStoreSimulator {
    static let historyPageSize = 20

    func handleServerAPI(_ request: HTTPRequest, environment: AppStoreEnvironment, _ path: [String]) async -> HTTPResponse {
        guard path.count >= 3, path[0] == "inApps" else { return ServerAPIError.generalBadRequest.withStatus(404).response }
        let nowSeconds = store.nowMs / 1000
        guard let app = ServerAPIAuth.authenticate(request.headers["Authorization"], store: store, nowSeconds: nowSeconds) else {
            return ServerAPIError.unauthenticated.response
        }
        let route = (request.method, path[1], path[2], path.count)
        do {
            switch route {
            case ("GET", "v1", "transactions", 4):
                let t = try findTransaction(path[3], app: app, environment: environment)
                guard let served = store.served(t, as: .serverAPI) else { throw ServerAPIError.transactionIdNotFound }
                return .json(200, JSONValue.object(["signedTransactionInfo": .string(try sign(served))]).jsonText)
            case ("GET", "v2", "history", 4):
                let t = try findTransaction(path[3], app: app, environment: environment)
                // A transaction the Server API does not have cannot be asked about, as at Apple.
                guard store.served(t, as: .serverAPI) != nil else { throw ServerAPIError.transactionIdNotFound }
                return try history(of: t, app: app, query: request.query)
            case ("GET", "v1", "subscriptions", 4):
                let t = try findTransaction(path[3], app: app, environment: environment)
                return try subscriptionStatuses(of: t, app: app)
            case ("GET", "v1", "lookup", 4):
                return try orderLookup(path[3], app: app, environment: environment)
            case ("GET", "v2", "refund", 5) where path[3] == "lookup":
                let t = try findTransaction(path[4], app: app, environment: environment)
                let refunded = store.served(store.transactions(owner: t.owner, bundleId: app.bundleId, environment: environment),
                                            as: .serverAPI)
                    .filter { $0.revocationDate != nil && !$0.isUpgraded }
                return .json(200, JSONValue.object([
                    "signedTransactions": .array(try refunded.map { .string(try sign($0)) }),
                    "revision": .string(String(refunded.last?.modifiedSequence ?? 0)), "hasMore": .bool(false),
                ]).jsonText)
            case ("POST", "v1", "notifications", 4) where path[3] == "test":
                let token = try await sendTestNotification(app: app, environment: environment)
                return .json(200, JSONValue.object(["testNotificationToken": .string(token)]).jsonText)
            case ("POST", "v1", "notifications", 4) where path[3] == "history":
                return try notificationHistory(request, app: app, environment: environment)
            case ("PUT", "v1", "transactions", 5) where path[3] == "consumption":
                _ = try findTransaction(path[4], app: app, environment: environment)
                guard (try? StrictJSON().parse(request.body).objectValue) != nil else { throw ServerAPIError.generalBadRequest }
                return HTTPResponse(status: 202)
            case ("GET", "v1", "transactions", 5) where path[3] == "appTransactions":
                // Get App Transaction Info: any transaction id of the customer, or its appTransactionId.
                guard !path[4].isEmpty, path[4].utf8.count <= 32, path[4].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                    throw ServerAPIError.invalidTransactionId
                }
                guard let owner = store.appOwner(anyTransactionId: path[4], bundleId: app.bundleId, environment: environment)
                else { throw ServerAPIError.transactionIdNotFound }
                return .json(200, JSONValue.object(["signedAppTransactionInfo": .string(
                    try signedAppTransaction(owner: owner, bundleId: app.bundleId, environment: environment))]).jsonText)
            case ("POST", "v1", "transactions", 5) where path[4] == "finish":
                // Finish Transaction (API 1.20): no body either way; recorded so tests can count calls.
                let t = try findTransaction(path[3], app: app, environment: environment)
                store.recordFinish(FinishTransactionCall(transactionId: t.transactionId, bundleId: app.bundleId,
                                                         environment: environment, at: store.nowMs))
                return HTTPResponse(status: 200)
            case ("PUT", "v1", "transactions", 5) where path[4] == "appAccountToken":
                let t = try findTransaction(path[3], app: app, environment: environment, notFound: .originalTransactionIdNotFound)
                guard let body = try? StrictJSON().parse(request.body).objectValue,
                      case .string(let token)? = body["appAccountToken"], UUID(uuidString: token) != nil else {
                    throw ServerAPIError.invalidAppAccountToken
                }
                _ = store.setAppAccountToken(token.lowercased(), originalTransactionId: t.originalTransactionId)
                return HTTPResponse(status: 200)
            default:
                return ServerAPIError.generalBadRequest.withStatus(404).response
            }
        } catch let error as ServerAPIError {
            return error.response
        } catch {
            return ServerAPIError.generalInternalRetryable.response
        }
    }

    func sign(_ t: TransactionRecord) throws -> String {
        try pki.signJWS(SignedPayloads.transaction(t, signedDate: store.nowMs))
    }

    func findTransaction(_ id: String, app: SimulatedApp, environment: AppStoreEnvironment,
                         notFound: ServerAPIError = .transactionIdNotFound) throws(ServerAPIError) -> TransactionRecord {
        guard !id.isEmpty, id.utf8.count <= 32, id.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw notFound.code == 4040005 ? .invalidOriginalTransactionId : .invalidTransactionId
        }
        guard let t = store.transaction(id), t.bundleId == app.bundleId, t.environment == environment else { throw notFound }
        return t
    }

    /// Newest-change paging: `revision` is the last change sequence returned (ascending) or the
    /// offset reached (descending); opaque to clients either way.
    func history(of t: TransactionRecord, app: SimulatedApp, query: [String: String]) throws -> HTTPResponse {
        let descending = query["sort"] == "DESCENDING"
        // A transaction planted as legacy-only is left out of the list (and asking with its own id
        // is answered 404 above, as Apple answers for a transaction it does not know).
        var all = store.served(store.transactions(owner: t.owner, bundleId: app.bundleId, environment: t.environment),
                               as: .serverAPI)
        if let p = query["productId"] { all = all.filter { $0.productId == p } }
        if let g = query["subscriptionGroupIdentifier"] { all = all.filter { $0.subscriptionGroupIdentifier == g } }
        if let o = query["inAppOwnershipType"] { all = all.filter { $0.ownership.rawValue == o } }
        if let r = query["revoked"] { all = all.filter { ($0.revocationDate != nil) == (r == "true") } }
        if let type = query["productType"] {
            let wanted: [String: TransactionType] = ["AUTO_RENEWABLE": .autoRenewable, "NON_RENEWABLE": .nonRenewing,
                                                     "CONSUMABLE": .consumable, "NON_CONSUMABLE": .nonConsumable]
            all = all.filter { $0.type == wanted[type] }
        }
        all.sort { $0.modifiedSequence < $1.modifiedSequence }
        if descending { all.reverse() }
        var start = 0
        if let revision = query["revision"] {
            guard let n = Int64(revision), n >= 0 else { throw ServerAPIError.invalidRevision }
            start = descending ? Int(n) : (all.firstIndex { $0.modifiedSequence > n } ?? all.count)
        }
        let page = Array(all.dropFirst(start).prefix(Self.historyPageSize))
        let end = start + page.count
        let revision = descending ? Int64(end) : (page.last?.modifiedSequence ?? (start > 0 ? all[start - 1].modifiedSequence : 0))
        return .json(200, JSONValue.object([
            "revision": .string(String(revision)), "hasMore": .bool(end < all.count),
            "bundleId": .string(app.bundleId), "appAppleId": .int(app.appAppleId),
            "environment": .string(t.environment.rawValue),
            "signedTransactions": .array(try page.map { .string(try sign($0)) }),
        ]).jsonText)
    }

    func subscriptionStatuses(of t: TransactionRecord, app: SimulatedApp) throws -> HTTPResponse {
        let now = store.nowMs
        let chains = store.chains(owner: t.owner, bundleId: app.bundleId, environment: t.environment)
        var groups: [String: [JSONValue]] = [:]
        for c in chains {
            guard let latest = latestServed(of: c) else { continue }
            groups[c.subscriptionGroupIdentifier, default: []].append(.object([
                "status": .int(SignedPayloads.status(c, latest: latest, now: now)),
                "originalTransactionId": .string(c.originalTransactionId),
                "signedTransactionInfo": .string(try sign(latest)),
                // Renewal info stays the store's truth: plants change transactions, not renewal state.
                "signedRenewalInfo": .string(try pki.signJWS(SignedPayloads.renewalInfo(
                    c, latest: store.transaction(c.latestTransactionId) ?? latest, signedDate: now))),
            ]))
        }
        let data: [JSONValue] = groups.keys.sorted().map { g in
            .object(["subscriptionGroupIdentifier": .string(g), "lastTransactions": .array(groups[g]!)])
        }
        return .json(200, JSONValue.object([
            "environment": .string(t.environment.rawValue), "bundleId": .string(app.bundleId),
            "appAppleId": .int(app.appAppleId), "data": .array(data),
        ]).jsonText)
    }

    /// The chain's newest transaction the Server API shows (a planted legacy-only latest steps back
    /// to the one before it); nil when it shows none of the chain.
    func latestServed(of c: SubscriptionChain) -> TransactionRecord? {
        if let latest = store.transaction(c.latestTransactionId), let served = store.served(latest, as: .serverAPI) {
            return served
        }
        let chain = store.transactions(owner: c.owner, bundleId: c.bundleId, environment: c.environment)
            .filter { $0.originalTransactionId == c.originalTransactionId }
        return store.served(chain, as: .serverAPI).last
    }

    func orderLookup(_ orderId: String, app: SimulatedApp, environment: AppStoreEnvironment) throws -> HTTPResponse {
        let matches = store.served(store.state.withLock { s in
            s.transactions.values.filter { $0.orderId == orderId && $0.bundleId == app.bundleId && $0.environment == environment }
        }, as: .serverAPI)
        guard !matches.isEmpty else { return .json(200, "{\"status\":1}") }
        return .json(200, JSONValue.object([
            "status": .int(0), "signedTransactions": .array(try matches.map { .string(try sign($0)) }),
        ]).jsonText)
    }

    func notificationHistory(_ request: HTTPRequest, app: SimulatedApp, environment: AppStoreEnvironment) throws -> HTTPResponse {
        guard let body = try? StrictJSON().parse(request.body).objectValue,
              case .int(let startDate)? = body["startDate"], case .int(let endDate)? = body["endDate"], startDate < endDate else {
            throw ServerAPIError.generalBadRequest
        }
        var records = store.notifications(bundleId: app.bundleId, environment: environment)
            .filter { $0.signedDate >= startDate && $0.signedDate < endDate }
        if case .string(let type)? = body["notificationType"] { records = records.filter { $0.notificationType == type } }
        if case .string(let sub)? = body["notificationSubtype"] { records = records.filter { $0.subtype == sub } }
        if case .string(let tid)? = body["transactionId"] {
            let original = store.transaction(tid)?.originalTransactionId
            records = records.filter { $0.originalTransactionId != nil && $0.originalTransactionId == original }
        }
        if body["onlyFailures"] == .bool(true) { records = records.filter { $0.sendAttemptResult != "SUCCESS" } }
        let items: [JSONValue] = records.map { r in
            .object([
                "signedPayload": .string(r.signedPayload),
                "sendAttemptResults": .array([.object(["attemptDate": .int(r.signedDate),
                                                      "sendAttemptResult": .string(r.sendAttemptResult)])]),
            ])
        }
        return .json(200, JSONValue.object(["notificationHistory": .array(items), "hasMore": .bool(false)]).jsonText)
    }
}

extension ServerAPIError {
    func withStatus(_ status: Int) -> ServerAPIError { ServerAPIError(status: status, code: status == 404 ? 4040000 : code, message: status == 404 ? "Not found." : message) }
}
