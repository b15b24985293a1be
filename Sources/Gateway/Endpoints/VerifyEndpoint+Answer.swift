import Adapters
import HTTPServer
import IAPCore

extension VerifyEndpoint {
    /// A verify answer's content, as the claim completes it (`AnswerShape.answer(to:)`).
    struct Answer: Sendable {
        let account: String
        let verdict: VerifyVerdict
        let outcome: AdapterOutcome
        let newlyGranted: [String]
        let alreadyGranted: [String]
        let revoked: [String]
        let entitlements: [EntitlementsEndpoint.Shown]
        let comparison: PurchaseComparison?
        let appTransaction: CanonicalAppTransaction?
        let grandfathered: Bool?
    }

    /// The one description of the verify answer: its body and its schema in the OpenAPI document.
    static let answerShape = JSONShape<Answer>.object([
        .required("account", .string) { $0.account },
        .required("verdict", JSONShape<VerifyVerdict>.cases.described(
            "granted: at least one purchase of the evidence grants access now, or is a consumable (credited: credit it for newlyGranted only); notGranted: genuine and bound to the account, but nothing grants access now. Evidence whose presented purchases are all refunded or revoked is refused instead (422 TRANSACTION_REVOKED).")) { $0.verdict },
        .required("adapter", .string) { $0.outcome.adapter.rawValue },
        .required("environment", .string) { $0.outcome.environment.rawValue },
        .required("mappingVersion", .string) { $0.outcome.mappingVersion },
        .required("transactions", .array(.canonical("CanonicalTransaction (Apple's names; mappingVersion says which mapping made it)"))) {
            $0.outcome.transactions
        },
        .required("renewals", .array(.canonical("CanonicalRenewal: each subscription chain's renewal info"))) { $0.outcome.renewals },
        .required("newlyGranted", .array(.string)) { $0.newlyGranted },
        .required("alreadyGranted", .array(.string)) { $0.alreadyGranted },
        .required("revoked", .array(.string)) { $0.revoked },
        .required("entitlements", .array(EntitlementsEndpoint.entitlement)) { $0.entitlements },
        .optional("comparison", ComparisonAnswers.verdict.described("compare mode: what both paths said, compared")) { $0.comparison },
        .optional("appTransaction", .canonical("app-transaction evidence only: the verified AppTransaction (CanonicalAppTransaction)")) {
            $0.appTransaction
        },
        .optional("grandfathered", JSONShape<Bool>.boolean.described(
            "app-transaction evidence, and receipts of apps with a grandfathering rule: whether the rule granted its products")) {
            $0.grandfathered
        },
    ]).named("VerifyResponse")
}

extension VerifyEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route("POST", "/v1/apps/{bundleId}/verify", name: "verify", body: "VerifyRequest", callsApple: true, answer: answerShape,
              summary: "Verify purchase evidence, bind it to the account and answer its entitlements",
              refusals: [
                  "409": .error("bound to another account (TRANSACTION_BOUND_TO_OTHER_ACCOUNT)"),
                  "422": .error("the evidence was refused, its content included (see the error code)"),
                  "503": .error("nothing was stored, but for STORAGE_OUTCOME_UNKNOWN"),
              ],
              handler: .keyed { endpoints, request, app, key throws(VerificationError) in
                  try await endpoints.verify.answer(request, app: app, key: key)
              }),
    ]
}
