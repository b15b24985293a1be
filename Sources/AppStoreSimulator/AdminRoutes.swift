import AppleTrust
import Foundation
import HTTPServer
import IAPCore

/// The simulator's control surface (JSON), mirroring the Swift API for `iapgw-dev sim` and the demo:
///   POST /admin/apps                                         register (generates a key unless privateKeyPEM given)
///   POST /admin/purchases                                    buy
///   POST /admin/subscriptions/{originalTransactionId}/renew
///   POST /admin/subscriptions/{originalTransactionId}/expire        {expirationIntent?, billingRetry?}
///   POST /admin/subscriptions/{originalTransactionId}/change-product {productId}
///   POST /admin/transactions/{transactionId}/refund                 {reason?}
///   POST /admin/transactions/{transactionId}/revoke
///   POST /admin/transactions/{transactionId}/notify                 {notificationType, subtype?, url?}
///   POST /admin/transactions/{transactionId}/plant   {kind, side?, offsetSeconds?, productId?} (PlantedDiscrepancy.json)
///   DELETE /admin/transactions/{transactionId}/plant   GET /admin/plants   DELETE /admin/plants
///   GET  /admin/receipts/{Production|Sandbox}/{bundleId}/{owner}
///   PUT  /admin/faults/{all|production|sandbox}   DELETE /admin/faults
///   GET  /admin/faults                                        {"requests", "faulted"} (counts since start)
///   GET  /admin/trust-root                                    {"rootCertificateDER": base64}
extension AppStoreSimulator {
    func handleAdmin(_ request: HTTPRequest, _ path: [String]) async -> HTTPResponse {
        let body = (try? StrictJSON().parse(request.body.isEmpty ? Array("{}".utf8) : request.body))?.objectValue
        guard let body else { return adminError(400, "body must be a JSON object") }
        let f = JSONFields(body, context: "admin")
        do {
            switch (request.method, path.first ?? "", path.count) {
            case ("POST", "apps", 1):
                return try registerAppFromAdmin(f)
            case ("POST", "purchases", 1):
                return purchaseJSON(try purchase(try purchaseRequest(f)))
            case ("POST", "subscriptions", 3):
                let id = path[1]
                switch path[2] {
                case "renew": return purchaseJSON(try renew(originalTransactionId: id))
                case "expire":
                    return purchaseJSON(try expire(originalTransactionId: id, intent: try f.int64("expirationIntent") ?? 1,
                                                   billingRetry: try f.bool("billingRetry") ?? false))
                case "change-product":
                    return purchaseJSON(try changeProduct(originalTransactionId: id, to: try f.requiredString("productId")))
                default: return adminError(404, "unknown subscription operation")
                }
            case ("POST", "transactions", 3):
                let id = path[1]
                switch path[2] {
                case "refund": return purchaseJSON(try refund(transactionId: id, reason: try f.int64("reason") ?? 0))
                case "revoke": return purchaseJSON(try revoke(transactionId: id))
                case "notify":
                    guard let t = store.transaction(id) else { return adminError(404, "no transaction \(id)") }
                    let p = try result(for: t)
                    let payload = try await sendNotification(type: try f.requiredString("notificationType"),
                                                             subtype: try f.string("subtype"), purchase: p, to: try f.string("url"))
                    return .json(200, JSONValue.object(["signedPayload": .string(payload)]).jsonText)
                case "plant":
                    do {
                        try plant(try PlantedDiscrepancy(json: .object(f.object)), transactionId: id)
                    } catch let e as SimulatorError {
                        return adminError(store.transaction(id) == nil ? 404 : 400, e.message)
                    }
                    return plantsJSON()
                default: return adminError(404, "unknown transaction operation")
                }
            case ("GET", "receipts", 4):
                let env = AppStoreEnvironment(rawValue: path[1])
                let r = try receipt(owner: path[3], bundleId: path[2], environment: env)
                return .json(200, JSONValue.object(["receiptBase64": .string(r)]).jsonText)
            case ("PUT", "faults", 2):
                guard let scope = FaultScope(rawValue: path[1]) else { return adminError(400, "scope is all, production or sandbox") }
                faults.set(try faultSettings(f), for: scope)
                return .json(200, "{}")
            case ("DELETE", "transactions", 3) where path[2] == "plant":
                guard removePlant(transactionId: path[1]) else { return adminError(404, "nothing planted on \(path[1])") }
                return plantsJSON()
            case ("GET", "plants", 1):
                return plantsJSON()
            case ("DELETE", "plants", 1):
                removeAllPlants()
                return plantsJSON()
            case ("GET", "faults", 1):
                let c = faults.counts
                return .json(200, JSONValue.object(["requests": .int(Int64(c.requests)), "faulted": .int(Int64(c.faulted))]).jsonText)
            case ("DELETE", "faults", 1):
                faults.reset()
                return .json(200, "{}")
            case ("GET", "trust-root", 1):
                return .json(200, JSONValue.object(["rootCertificateDER": .string(rootCertificateDER.base64EncodedString())]).jsonText)
            default:
                return adminError(404, "unknown admin route")
            }
        } catch let e as SimulatorError {
            return adminError(404, e.message)
        } catch let e as VerificationError {
            return adminError(400, e.message)
        } catch {
            return adminError(500, "\(error)")
        }
    }

    private func adminError(_ status: Int, _ message: String) -> HTTPResponse {
        .json(status, JSONValue.object(["error": .string(message)]).jsonText)
    }

    private func registerAppFromAdmin(_ f: JSONFields) throws -> HTTPResponse {
        let bundleId = try f.requiredString("bundleId")
        let appAppleId = try f.requiredInt64("appAppleId")
        let secret = try f.requiredString("sharedSecret")
        let issuerId = try f.string("issuerId") ?? "57246542-96fe-1a63-e053-0824d011072a"
        let keyId = try f.string("keyId") ?? "SIMKEY0001"
        let version = try f.string("bundleVersion") ?? "1.0"
        let url = try f.string("notificationURL")
        if let pem = try f.string("privateKeyPEM") {
            let key = try ECPrivateKey(pkcs8PEM: pem)
            registerApp(SimulatedApp(bundleId: bundleId, appAppleId: appAppleId, sharedSecret: secret, issuerId: issuerId,
                                     keyId: keyId, apiPublicKey: key.publicKey, bundleVersion: version, notificationURL: url))
            return .json(200, JSONValue.object(["bundleId": .string(bundleId), "issuerId": .string(issuerId),
                                                "keyId": .string(keyId)]).jsonText)
        }
        let c = try registerApp(bundleId: bundleId, appAppleId: appAppleId, sharedSecret: secret, issuerId: issuerId,
                                keyId: keyId, bundleVersion: version, notificationURL: url)
        return .json(200, JSONValue.object(["bundleId": .string(bundleId), "issuerId": .string(issuerId),
                                            "keyId": .string(keyId), "privateKeyPEM": .string(c.privateKeyPEM)]).jsonText)
    }

    private func purchaseRequest(_ f: JSONFields) throws -> PurchaseRequest {
        var r = PurchaseRequest(bundleId: try f.requiredString("bundleId"), productId: try f.requiredString("productId"),
                                type: TransactionType(rawValue: try f.requiredString("type")), owner: try f.requiredString("owner"))
        if let e = try f.string("environment") { r.environment = AppStoreEnvironment(rawValue: e) }
        r.subscriptionGroupIdentifier = try f.string("subscriptionGroupIdentifier")
        if let v = try f.int64("periodSeconds") { r.periodSeconds = v }
        if let v = try f.int64("quantity") { r.quantity = v }
        if let v = try f.int64("price") { r.price = v }
        if let v = try f.string("currency") { r.currency = v }
        if let v = try f.string("storefront") { r.storefront = v }
        if let v = try f.string("storefrontId") { r.storefrontId = v }
        r.appAccountToken = try f.string("appAccountToken")
        r.familyShared = try f.bool("familyShared") ?? false
        if let offer = try f.fields("offer") {
            let discount = OfferDiscountType(rawValue: try offer.string("discountType") ?? "PAY_AS_YOU_GO")
            switch try offer.requiredString("type") {
            case "freeTrial": r.offer = .freeTrial
            case "introductory": r.offer = .introductory(discount)
            case "promotional": r.offer = .promotional(id: try offer.requiredString("id"), discount)
            case "offerCode": r.offer = .offerCode(refName: try offer.requiredString("id"), discount)
            default: throw SimulatorError("offer.type is freeTrial, introductory, promotional or offerCode")
            }
        }
        return r
    }

    private func faultSettings(_ f: JSONFields) throws -> FaultSettings {
        var s = FaultSettings()
        if let v = try f.int64("latencyMilliseconds") { s.latencyMilliseconds = Int(v) }
        if let v = try f.int64("failNext") { s.failNext = Int(v) }
        if let v = f.object["failureRate"] {
            switch v {
            case .double(let d): s.failureRate = d
            case .int(let i): s.failureRate = Double(i)
            default: throw SimulatorError("failureRate must be a number")
            }
        }
        if let v = try f.int64("seed") { s.seed = UInt64(bitPattern: v) }
        if let v = try f.int64("verifyReceiptStatus") { s.verifyReceiptFailure = .status(Int(v)) }
        if try f.bool("verifyReceiptHTTP503") == true { s.verifyReceiptFailure = .http503 }
        if let v = try f.int64("rateLimitNext") { s.rateLimitNext = Int(v) }
        if let v = try f.int64("retryAfterSeconds") { s.retryAfterSeconds = Int(v) }
        if let v = try f.int64("hangNext") { s.hangNext = Int(v) }
        if let v = try f.int64("hangMilliseconds") { s.hangMilliseconds = Int(v) }
        return s
    }

    /// `{"plants": [{"transactionId", "bundleId", "productId", "discrepancy": {...}}]}` in planting order.
    private func plantsJSON() -> HTTPResponse {
        .json(200, JSONValue.object(["plants": .array(plantedDiscrepancies.map { p in
            .object(["transactionId": .string(p.transactionId), "bundleId": .string(p.bundleId),
                     "productId": .string(p.productId), "discrepancy": p.discrepancy.json])
        })]).jsonText)
    }

    private func purchaseJSON(_ p: SimulatedPurchase) -> HTTPResponse {
        .json(200, JSONValue.object([
            "transactionId": .string(p.transactionId), "originalTransactionId": .string(p.originalTransactionId),
            "receiptBase64": .string(p.receiptBase64), "signedTransaction": .string(p.signedTransaction),
            "environment": .string(p.environment.rawValue), "bundleId": .string(p.bundleId),
            "productId": .string(p.productId), "orderId": .string(p.orderId),
        ]).jsonText)
    }
}
