import IAPGatewayClient

/// What the app is told about one purchase it sent.
enum PurchaseReply: Equatable {
    /// Finish the transaction: the gateway granted it (unlock these products).
    case unlocked(productIds: [String])
    /// Finish the transaction: genuine, but it grants nothing now (an expired subscription).
    case notGranted
    /// Finish the transaction: this evidence will never be granted (the code says why).
    case refused(code: String)
    /// Leave the transaction unfinished and send it again later (a receipt with a new nonce).
    case tryAgain(after: Duration?)
}

/// An app backend's purchase route: the app's evidence to the gateway, the gateway's answer to the app.
func handlePurchase(_ evidence: IAPGatewayEvidence, account: String,
                    gateway: IAPGatewayClient) async -> PurchaseReply {
    do {
        let verification = try await gateway.verify(account: account, evidence: evidence)
        guard verification.verdict == .granted else { return .notGranted }
        // Credit consumables for verification.newlyGranted only: a repeated call is alreadyGranted.
        return .unlocked(productIds: verification.entitlements.filter(\.grantsAccess).map(\.productId))
    } catch where error.retryable {
        return .tryAgain(after: error.retryAfter)
    } catch where error.kind == .refused && [400, 409, 413, 422].contains(error.status) {
        return .refused(code: error.code)
    } catch {
        // Not the evidence's fault (the API key, the bundle id, the gateway's configuration or
        // credentials at Apple): someone must fix it (quote error.requestId); the purchase stays
        // unfinished so that nothing paid is lost.
        return .tryAgain(after: nil)
    }
}
