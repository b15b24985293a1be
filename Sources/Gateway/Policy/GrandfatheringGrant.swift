import Adapters
import IAPConfig
import IAPCore

/// What the app's own purchase grants under the policy's `grandfathering` rule, and the one key
/// that binds it to one account, decided once per verify. Only Apple's word names the app
/// purchase: an app transaction's `appTransactionId` (signed, or read from Get App Transaction
/// Info), or a receipt's `download_id` (`CanonicalAppTransaction.downloadId`, which only Apple's live
/// answer states: the receipt's signed payload has none, so an adapter that read no such answer
/// leaves it nil). A fact that is absent, 0 (the sandbox) or not grandfathering grants nothing.
struct GrandfatheringGrant: Sendable {
    /// Each listed product, active without end, bound under `<appPurchaseKey>:<productId>`.
    let entitlements: [Entitlement]
    /// The answer's `grandfathered`: said for app transactions, and for receipts of an app with a
    /// rule; nil: not said for this evidence.
    let answered: Bool?

    /// The ownership keys the claim binds for what this grants.
    var appPurchaseKeys: [String] { entitlements.map(\.originalTransactionId) }

    init(_ outcome: AdapterOutcome, _ context: ClaimContext) {
        let kind = context.evidenceKind
        if let rule = context.app.grandfathering, let app = outcome.appTransaction, rule.grandfathers(app),
           let key = Self.appPurchaseKey(outcome, evidenceKind: kind) {
            entitlements = rule.productIds.map {
                Entitlement(account: context.account, productId: $0, state: .active, expiresDate: nil,
                            originalTransactionId: "\(key):\($0)", source: "grandfathering")
            }
        } else {
            entitlements = []
        }
        answered = kind.isAppTransaction || (kind == .receipt && context.app.grandfathering != nil) ? !entitlements.isEmpty : nil
    }

    /// `appTransaction:<appTransactionId>` or `receiptDownload:<download_id>`; nil: nothing to bind.
    static func appPurchaseKey(_ outcome: AdapterOutcome, evidenceKind: AppPolicy.EvidenceKind) -> String? {
        guard let app = outcome.appTransaction else { return nil }
        if evidenceKind.isAppTransaction {
            guard let id = app.appTransactionId, !id.isEmpty else { return nil }
            return "appTransaction:\(id)"
        }
        guard evidenceKind == .receipt, let download = app.downloadId, download > 0 else { return nil }
        return "receiptDownload:\(download)"
    }
}
