import Adapters
import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// GET /v1/apps/{bundleId}/orders/{orderId}[?since=&limit=]: support's answer to a customer who
/// quotes the order ID of Apple's receipt e-mail (also `iapgw audit --order-id`). Apple's
/// transactions of the order (Look Up Order ID), each verified like any other JWS, each with the
/// account of this gateway that owns its purchase chain, and each such account's history as the
/// history route shows it.
struct OrderLookupEndpoint: Sendable {
    /// The adapter that asks Apple; nil: no registered adapter can, and the route answers 404.
    let orders: (any OrderLookingUp)?
    let ledger: any Ledger
    let history: HistoryEndpoint

    func answer(_ request: HTTPRequest, app: AppPolicy, orderId: String) async throws(VerificationError) -> HTTPResponse {
        let (since, limit) = try HistoryEndpoint.window(request)
        return .json(200, try await audit(app: app, orderId: orderId, since: since, limit: limit).jsonText)
    }

    func audit(app: AppPolicy, orderId: String, since: Int64, limit: Int) async throws(VerificationError) -> JSONValue {
        guard let orders else { throw VerificationError(.notFound, "no adapter can look up an order id") }
        // Support's question names no account: every environment some claim of the app may use is asked.
        let outcome = try await orders.lookUpOrder(orderId, app: app, policy: ClaimPolicy(app: app, claimant: .apple))
        var owners: [String] = []
        var transactions: [(transaction: CanonicalTransaction, owner: String?)] = []
        for t in outcome.transactions {
            let owner = try await ledger.owner(bundleId: app.bundleId, originalTransactionId: t.originalTransactionId ?? t.transactionId)
            if let owner, !owners.contains(owner) { owners.append(owner) }
            transactions.append((t, owner))
        }
        var accounts: [JSONValue] = []
        for owner in owners {
            accounts.append(try await history.audit(app: app, subject: .account(owner), since: since, limit: limit))
        }
        return Self.answer.encode(Found(bundleId: app.bundleId, orderId: orderId, outcome: outcome, transactions: transactions,
                                        accounts: accounts))
    }

    struct Found: Sendable {
        let bundleId: String
        let orderId: String
        let outcome: AdapterOutcome
        let transactions: [(transaction: CanonicalTransaction, owner: String?)]
        /// Each owner's history, as `HistoryEndpoint.answer` encodes it.
        let accounts: [JSONValue]
    }

    static let answer = JSONShape<Found>.object([
        .required("bundleId", .string) { $0.bundleId },
        .required("orderId", .string) { $0.orderId },
        .required("environment", JSONShape<String>.string.described("where Apple knew the order (Production asked first)")) {
            $0.outcome.environment.rawValue
        },
        .required("mappingVersion", .string) { $0.outcome.mappingVersion },
        .required("transactions", .array(.object([
            .required("transaction", .canonical(
                "CanonicalTransaction, verified like any other JWS (pinned roots, chain, ES256, the app's bundle, app id and environments)")) {
                $0.transaction
            },
            .optional("owner", JSONShape<String>.string.described(
                "the account of this gateway its purchase chain is bound to; absent when none is")) { $0.owner },
        ]))) { $0.transactions },
        .required("accounts", .array(JSONShape.encoded(by: HistoryEndpoint.answer).described(
            "each owner's history, once per account, as GET …/accounts/{account}/history answers it"))) { $0.accounts },
    ]).named("OrderLookup")
}

extension OrderLookupEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route("GET", "/v1/apps/{bundleId}/orders/{orderId}", name: "order_lookup", query: HistoryEndpoint.queryParameters, callsApple: true,
              answer: answer,
              summary: "Support: the order ID of a customer's App Store receipt e-mail. Apple's transactions of the order (Look Up Order ID), each verified like any other JWS, with the account here that owns its purchase chain (absent when none does), and each such account's history as the history route shows it (`since`, `limit` as there)",
              refusals: [
                  "400": .error("an order id that is not 1 to 64 letters and digits, or a bad since/limit"),
                  "404": .error("an order Apple does not know in any environment the app allows (ORDER_NOT_FOUND)"),
                  "422": .error("Apple's answer did not verify (a signature, chain or identity check failed)"),
              ],
              handler: .app(Route.pathApp) { endpoints, request, app, parameters throws(VerificationError) in
                  try await endpoints.orders.answer(request, app: app, orderId: parameters["orderId", default: ""])
              }),
    ]
}
