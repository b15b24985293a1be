import IAPGatewayClient

/// What the app is told about one purchase it sent.
enum PurchaseReply: Equatable {
    /// Finish the transaction: the gateway granted it (unlock these products).
    case unlocked(productIds: [String])
    /// Finish the transaction: genuine, but it grants nothing now (an expired subscription).
    case notGranted
    /// Finish the transaction: this evidence will never be granted (the code says why).
    case refused(code: String)
    /// Leave the transaction unfinished and send it again later (with the same idempotency key).
    case tryAgain(after: Duration?)
}

/// An app backend's purchase route: the app's evidence to the gateway, the gateway's answer to the
/// app. `purchaseKey`: made when the purchase first reached the backend and kept with it, so every
/// later try of this purchase is answered as its first completed one was.
func handlePurchase(_ evidence: IAPGatewayEvidence, account: String, purchaseKey: String,
                    gateway: IAPGatewayClient) async -> PurchaseReply {
    do {
        let verification = try await gateway.verify(account: account, evidence: evidence, idempotencyKey: purchaseKey)
        guard verification.verdict == .granted else { return .notGranted }
        // Credit consumables for verification.newlyGranted only (once per transaction id: a
        // replayed answer repeats them; a call under a new key answers them alreadyGranted).
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
