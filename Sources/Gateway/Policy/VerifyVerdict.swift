import IAPConfig
import IAPCore
import Ledger

/// The `verdict` of a 200 verify answer, the same for every kind of evidence: decided here alone,
/// once per answer (by `VerifyJudge`, inside the claim), from the answer's entitlements as they
/// stand now (`EntitlementAccess`). Evidence whose presented purchases are all refunded or revoked
/// gets no verdict: it is refused, 422 `TRANSACTION_REVOKED` (`RevocationRuling`), for a receipt as
/// for a transaction id or a signed transaction.
public enum VerifyVerdict: String, Sendable, CaseIterable {
    /// At least one purchase chain of the evidence grants access now, or is a consumable (`credited`:
    /// credit it for `newlyGranted` only, which a repeated claim answers `alreadyGranted`).
    case granted
    /// The evidence is genuine and bound to the account, but nothing in it grants access now
    /// (an expired subscription, billing retry the app's policy does not grant, a later refund).
    case notGranted

    /// `entitlements` must already stand at the answer's time (`EntitlementAccess.current`).
    static func of(_ entitlements: [Entitlement], policy: AppPolicy.GracePeriodPolicy) -> VerifyVerdict {
        entitlements.contains { $0.state == .credited || EntitlementAccess.grantsAccess($0.state, policy: policy) }
            ? .granted : .notGranted
    }

    /// The audit trail's word for this verdict (the audit row says what the answer said).
    var audited: AuditVerdict {
        switch self {
        case .granted: .granted
        case .notGranted: .notGranted
        }
    }
}
