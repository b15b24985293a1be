/// Builds the webhook events one lifecycle event produces.
///
/// Keys are derived from (event id, chain, kind) only, never from the state or the clock, so a
/// redelivered notification — or the same one processed again after a crash — yields the same
/// key and the app backend can drop the repeat.
struct LifecycleWebhooks {
    let event: LifecycleEvent
    let chainId: String?

    /// "<kind>:<length of chain id>:<chain id>:<event id>". The length prefix keeps the parts
    /// apart even though event ids may contain ':' ("reconcile:…").
    static func idempotencyKey(eventId: String, originalTransactionId: String?, kind: WebhookEvent.Kind) -> String {
        let chain = originalTransactionId ?? ""
        return "\(kind.rawValue):\(chain.utf8.count):\(chain):\(eventId)"
    }

    func entitlementChanged(_ state: SubscriptionState) -> WebhookEvent {
        make(.entitlementChanged, transactionId: state.lastTransactionId, productId: state.productId,
             state: state.state, expiresDate: state.expiresDate)
    }

    /// A kind-specific event about what the notification says; `state` adds the chain's state.
    func notice(_ kind: WebhookEvent.Kind, state: SubscriptionState? = nil) -> WebhookEvent {
        make(kind, transactionId: event.transaction?.transactionId,
             productId: state?.productId ?? event.transaction?.productId,
             state: state?.state, expiresDate: state?.expiresDate ?? event.transaction?.expiresDate)
    }

    private func make(_ kind: WebhookEvent.Kind, transactionId: String?, productId: String?,
                      state: Entitlement.State?, expiresDate: Int64?) -> WebhookEvent {
        var out = WebhookEvent(kind: kind,
                               idempotencyKey: Self.idempotencyKey(eventId: event.id, originalTransactionId: chainId, kind: kind),
                               bundleId: event.bundleId, originalTransactionId: chainId, transactionId: transactionId,
                               productId: productId, state: state, expiresDate: expiresDate,
                               notificationType: event.notificationType.rawValue, subtype: event.subtype?.rawValue,
                               occurredAt: event.signedDate)
        // Facts of the notification's own transaction, when the event is about it.
        if let transaction = event.transaction, transaction.transactionId == transactionId {
            out.revocationType = transaction.revocationType
            out.revocationPercentage = transaction.revocationPercentage
            out.commitmentExpiresDate = transaction.commitmentExpiresDate
        }
        return out
    }
}
