import Foundation
import IAPCore
import UpstreamHTTP

/// The routes, named as in Apple's app-store-server-library.
extension AppStoreServerAPIClient {
    /// GET /inApps/v1/transactions/{transactionId}
    public func getTransactionInfo(transactionId: String, order: ServerAPIEnvironmentOrder = .productionOnly)
        async throws(VerificationError) -> TransactionInfoResponse {
        let call = Call(method: "GET", name: "getTransactionInfo",
                        path: "/inApps/v1/transactions/" + (try Self.checkTransactionId(transactionId)))
        let (environment, f) = try await performJSON(call, order: order)
        let signed = try read(call) { () throws(VerificationError) in try f.requiredString("signedTransactionInfo") }
        return TransactionInfoResponse(environment: environment, raw: .object(f.object), signedTransactionInfo: signed)
    }

    /// GET /inApps/v2/history/{transactionId}, oldest first, following `revision` while `hasMore`.
    /// Only the first page may fall back to sandbox; later pages stay where the first was found.
    public func getTransactionHistory(transactionId: String, revision: String? = nil,
                                      order: ServerAPIEnvironmentOrder = .productionOnly)
        async throws(VerificationError) -> TransactionHistoryResponse {
        let path = "/inApps/v2/history/" + (try Self.checkTransactionId(transactionId))
        let pages = try await collectPages(name: "getTransactionHistory", path: path, revision: revision,
                                           extraQuery: [("sort", "ASCENDING")], order: order)
        return TransactionHistoryResponse(environment: pages.environment, rawPages: pages.raw,
                                          signedTransactions: pages.signed, revision: pages.revision,
                                          isComplete: pages.complete)
    }

    /// GET /inApps/v1/subscriptions/{transactionId}
    public func getAllSubscriptionStatuses(transactionId: String, order: ServerAPIEnvironmentOrder = .productionOnly)
        async throws(VerificationError) -> SubscriptionStatusesResponse {
        let call = Call(method: "GET", name: "getAllSubscriptionStatuses",
                        path: "/inApps/v1/subscriptions/" + (try Self.checkTransactionId(transactionId)))
        let (environment, f) = try await performJSON(call, order: order)
        let groups = try read(call) { () throws(VerificationError) -> [SubscriptionGroupStatus] in
            try (f.array("data") ?? []).map { (group: JSONValue) throws(VerificationError) -> SubscriptionGroupStatus in
                let g = try JSONFields(group, context: "data[]")
                let items = try (g.array("lastTransactions") ?? []).map { (item: JSONValue) throws(VerificationError) in
                    let i = try JSONFields(item, context: "lastTransactions[]")
                    return LastTransactionsItem(status: try i.int64("status"),
                                                originalTransactionId: try i.requiredString("originalTransactionId"),
                                                signedTransactionInfo: try i.requiredString("signedTransactionInfo"),
                                                signedRenewalInfo: try i.string("signedRenewalInfo"))
                }
                return SubscriptionGroupStatus(subscriptionGroupIdentifier: try g.string("subscriptionGroupIdentifier"),
                                               lastTransactions: items)
            }
        }
        return SubscriptionStatusesResponse(environment: environment, raw: .object(f.object), data: groups)
    }

    /// What `lookUpOrderId` takes, as a regular expression (the gateway's API document states it).
    public static let orderIdPattern = "^[A-Za-z0-9]{1,64}$"

    /// GET /inApps/v1/lookup/{orderId}
    public func lookUpOrderId(_ orderId: String, order: ServerAPIEnvironmentOrder = .productionOnly)
        async throws(VerificationError) -> OrderLookupResponse {
        guard (1...64).contains(orderId.utf8.count),
              orderId.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) })
        else { throw VerificationError(.malformedRequest, "an order id is 1 to 64 letters and digits") }
        let call = Call(method: "GET", name: "lookUpOrderId", path: "/inApps/v1/lookup/" + orderId)
        let (environment, f) = try await performJSON(call, order: order)
        return try read(call) { () throws(VerificationError) in
            OrderLookupResponse(environment: environment, raw: .object(f.object), status: try f.requiredInt64("status"),
                                signedTransactions: try Self.strings(f, "signedTransactions"))
        }
    }

    /// POST /inApps/v1/notifications/test
    public func requestTestNotification(environment: ServerAPIEnvironment = .production)
        async throws(VerificationError) -> TestNotificationResponse {
        let call = Call(method: "POST", name: "requestTestNotification", path: "/inApps/v1/notifications/test")
        let (env, f) = try await performJSON(call, order: .only(environment))
        let token = try read(call) { () throws(VerificationError) in try f.requiredString("testNotificationToken") }
        return TestNotificationResponse(environment: env, raw: .object(f.object), testNotificationToken: token)
    }

    /// POST /inApps/v1/notifications/history?paginationToken=… with `{startDate, endDate}` (ms since 1970).
    /// One page per call: the caller decides how far to page.
    public func getNotificationHistory(startDate: Int64, endDate: Int64, paginationToken: String? = nil,
                                       environment: ServerAPIEnvironment = .production)
        async throws(VerificationError) -> NotificationHistoryResponse {
        guard startDate < endDate else { throw VerificationError(.malformedRequest, "startDate must be before endDate") }
        var call = Call(method: "POST", name: "getNotificationHistory", path: "/inApps/v1/notifications/history",
                        body: .object(["startDate": .int(startDate), "endDate": .int(endDate)]))
        if let paginationToken { call.query = [("paginationToken", paginationToken)] }
        let (env, f) = try await performJSON(call, order: .only(environment))
        return try read(call) { () throws(VerificationError) in
            let items = try (f.array("notificationHistory") ?? []).map { (item: JSONValue) throws(VerificationError) in
                NotificationHistoryResponse.Item(
                    signedPayload: try JSONFields(item, context: "notificationHistory[]").requiredString("signedPayload"),
                    raw: item)
            }
            return NotificationHistoryResponse(environment: env, raw: .object(f.object), notificationHistory: items,
                                               hasMore: try f.bool("hasMore") ?? false,
                                               paginationToken: try f.string("paginationToken"))
        }
    }

    /// PUT /inApps/v1/transactions/consumption/{transactionId} with a ConsumptionRequest body (202, no body).
    public func sendConsumptionData(transactionId: String, body: JSONValue,
                                    environment: ServerAPIEnvironment = .production) async throws(VerificationError) {
        guard body.objectValue != nil else { throw VerificationError(.malformedRequest, "consumption data must be a JSON object") }
        let call = Call(method: "PUT", name: "sendConsumptionData",
                        path: "/inApps/v1/transactions/consumption/" + (try Self.checkTransactionId(transactionId)), body: body)
        _ = try await perform(call, order: .only(environment))
    }

    /// PUT /inApps/v1/transactions/{originalTransactionId}/appAccountToken with `{"appAccountToken": uuid}`.
    public func setAppAccountToken(originalTransactionId: String, appAccountToken: String,
                                   environment: ServerAPIEnvironment = .production) async throws(VerificationError) {
        guard let uuid = UUID(uuidString: appAccountToken) else {
            throw VerificationError(.malformedRequest, "appAccountToken must be a UUID")
        }
        let call = Call(method: "PUT", name: "setAppAccountToken",
                        path: "/inApps/v1/transactions/" + (try Self.checkTransactionId(originalTransactionId)) + "/appAccountToken",
                        body: .object(["appAccountToken": .string(uuid.uuidString.lowercased())]))
        _ = try await perform(call, order: .only(environment))
    }

    /// GET /inApps/v1/transactions/appTransactions/{id}: the customer's AppTransaction (JWS), by any of
    /// its transaction ids or its appTransactionId.
    public func getAppTransactionInfo(anyTransactionId id: String, order: ServerAPIEnvironmentOrder = .productionOnly)
        async throws(VerificationError) -> (environment: ServerAPIEnvironment, signedAppTransactionInfo: String) {
        let call = Call(method: "GET", name: "getAppTransactionInfo",
                        path: "/inApps/v1/transactions/appTransactions/" + (try Self.checkTransactionId(id)))
        let (environment, f) = try await performJSON(call, order: order)
        return (environment, try read(call) { () throws(VerificationError) in try f.requiredString("signedAppTransactionInfo") })
    }

    /// POST /inApps/v1/transactions/{transactionId}/finish, no body (API 1.20): the server delivered
    /// the content. Any 2xx is success; the answer's body, if any, is not read.
    public func finishTransaction(transactionId: String, environment: ServerAPIEnvironment = .production)
        async throws(VerificationError) {
        let call = Call(method: "POST", name: "finishTransaction",
                        path: "/inApps/v1/transactions/" + (try Self.checkTransactionId(transactionId)) + "/finish")
        _ = try await perform(call, order: .only(environment))
    }

    // MARK: Helpers

    /// Transaction ids are decimal digits (Xcode's are small numbers): anything else is refused
    /// before it can reach a URL path.
    /// What `checkTransactionId` takes, as a regular expression.
    public static let transactionIdPattern = "^[0-9]{1,32}$"

    static func checkTransactionId(_ id: String) throws(VerificationError) -> String {
        guard (1...32).contains(id.utf8.count), id.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw VerificationError(.malformedRequest, "a transaction id is 1 to 32 decimal digits")
        }
        return id
    }

    static func strings(_ f: JSONFields, _ key: String) throws(VerificationError) -> [String] {
        try (f.array(key) ?? []).map { (v: JSONValue) throws(VerificationError) -> String in
            guard case .string(let s) = v else {
                throw VerificationError(.invalidFieldType, "\(f.context).\(key)[] must be strings, found \(v.typeName)")
            }
            return s
        }
    }

    private struct Pages {
        var environment: ServerAPIEnvironment
        var raw: [JSONValue] = []
        var signed: [String] = []
        var revision: String?
        var complete = false
    }

    private func collectPages(name: String, path: String, revision: String?, extraQuery: [(String, String)],
                              order: ServerAPIEnvironmentOrder) async throws(VerificationError) -> Pages {
        var pages: Pages?
        var nextRevision = revision
        var order = order
        for pageNumber in 1...maxPages {
            var call = Call(method: "GET", name: name, path: path, query: extraQuery)
            if let nextRevision { call.query.insert(("revision", nextRevision), at: 0) }
            let (environment, f) = try await performJSON(call, order: order)
            order = .only(environment)
            let (signed, hasMore, pageRevision) = try read(call) { () throws(VerificationError) in
                (try Self.strings(f, "signedTransactions"), try f.bool("hasMore") ?? false, try f.string("revision"))
            }
            var collected = pages ?? Pages(environment: environment)
            collected.raw.append(.object(f.object))
            collected.signed += signed
            collected.revision = pageRevision ?? collected.revision
            pages = collected
            guard hasMore else {
                pages?.complete = true
                break
            }
            guard let pageRevision, pageRevision != nextRevision else {
                throw VerificationError(.upstreamInvalidResponse,
                                        "App Store Server API \(name): hasMore without a new revision on page \(pageNumber)")
            }
            nextRevision = pageRevision
        }
        guard let pages else { throw VerificationError(.upstreamUnavailable, "App Store Server API \(name): no page") }
        if !pages.complete {
            logger.warning("serverapi.page_cap", ["route": name, "pages": String(maxPages)])
        }
        return pages
    }
}
