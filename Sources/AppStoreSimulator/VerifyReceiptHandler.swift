import AppReceipts
import Foundation
import HTTPServer
import IAPCore

/// `POST /{production|sandbox}/verifyReceipt` with Apple's status semantics.
struct VerifyReceiptHandler {
    let simulator: AppStoreSimulator
    let environment: AppStoreEnvironment

    static func statusOnly(_ status: Int, environment: AppStoreEnvironment) -> String {
        var o: [String: JSONValue] = ["status": .int(Int64(status)), "environment": .string(environment.rawValue)]
        // Apple marks only its 21100–21199 internal errors as retryable or not.
        if (21100...21199).contains(status) { o["is-retryable"] = .bool(true) }
        return JSONValue.object(o).jsonText
    }

    func handle(_ request: HTTPRequest) -> HTTPResponse {
        let store = simulator.store
        guard let body = (try? StrictJSON().parse(request.body))?.objectValue,
              case .string(let receiptData)? = body["receipt-data"],
              let der = Data(base64Encoded: receiptData, options: .ignoreUnknownCharacters), !der.isEmpty else {
            return answer(["status": .int(21002)])
        }
        var response: [String: JSONValue] = [:]
        if let requestData = body["request_data"] { response["request_data"] = requestData }
        func status(_ code: Int64) -> HTTPResponse {
            response["status"] = .int(code)
            return answer(response)
        }
        guard let read = try? simulator.receiptReader.read(der: Array(der), mode: .unverified) else { return status(21002) }
        guard read.signatureVerified else { return status(21003) }
        let receipt = read.receipt
        let receiptEnvironment: AppStoreEnvironment = receipt.receiptType == "ProductionSandbox" ? .sandbox : .production
        if environment == .production && receiptEnvironment == .sandbox { return status(21007) }
        if environment == .sandbox && receiptEnvironment == .production { return status(21008) }
        guard let bundleId = receipt.bundleId, let app = store.app(bundleId) else { return status(21010) }

        let receiptTransactions = receipt.inAppPurchases.compactMap { $0.transactionId.flatMap(store.transaction) }
            .filter { $0.bundleId == bundleId && $0.environment == environment }
        // Planted discrepancies change this JSON only; the receipt itself keeps listing every transaction.
        let servedReceiptTransactions = store.served(receiptTransactions, as: .legacy)
        let owner = receiptTransactions.first?.owner
        let ownerTransactions = owner.map { store.transactions(owner: $0, bundleId: bundleId, environment: environment) } ?? []
        let hasSubscriptions = ownerTransactions.contains { $0.type == .autoRenewable }
        let password = body["password"]?.stringValue
        if let password, password != app.sharedSecret { return status(21004) }
        if password == nil && hasSubscriptions { return status(21004) }

        let now = store.nowMs
        response["environment"] = .string(environment.rawValue)
        response["receipt"] = VerifyReceiptJSON.receipt(
            bundleId: bundleId, appItemId: receipt.appItemId ?? 0, receiptType: receipt.receiptType ?? "Production",
            appVersion: receipt.appVersion ?? app.bundleVersion, creationDate: receipt.creationDate ?? now, requestDate: now,
            originalPurchaseDate: receipt.originalPurchaseDate ?? now,
            originalApplicationVersion: receipt.originalAppVersion ?? "1.0", inApp: servedReceiptTransactions)
        if hasSubscriptions, let owner {
            let excludeOld = body["exclude-old-transactions"] == .bool(true)
            let chains = store.chains(owner: owner, bundleId: bundleId, environment: environment)
            var latest = store.served(ownerTransactions, as: .legacy)
            if excludeOld {
                let latestIds = Set(chains.map(\.latestTransactionId))
                latest = latest.filter { $0.type != .autoRenewable || latestIds.contains($0.transactionId) }
            }
            latest.sort { ($0.purchaseDate, $0.transactionId) > ($1.purchaseDate, $1.transactionId) }
            response["latest_receipt_info"] = .array(latest.map { VerifyReceiptJSON.transaction($0, latestInfo: true) })
            response["pending_renewal_info"] = .array(chains.compactMap { c in
                store.transaction(c.latestTransactionId).map { VerifyReceiptJSON.pendingRenewal(c, latest: $0) }
            })
            if let fresh = try? simulator.receipt(owner: owner, bundleId: bundleId, environment: environment) {
                response["latest_receipt"] = .string(fresh)
            }
        }
        return status(0)
    }

    private func answer(_ o: [String: JSONValue]) -> HTTPResponse {
        var o = o
        if o["environment"] == nil { o["environment"] = .string(environment.rawValue) }
        return .json(200, JSONValue.object(o).jsonText)
    }
}
