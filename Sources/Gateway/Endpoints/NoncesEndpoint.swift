import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// POST /v1/apps/{bundleId}/nonces: a single-use nonce for the account, to send with a receipt.
struct NoncesEndpoint: Sendable {
    let ledger: any Ledger
    let now: @Sendable () -> Int64

    /// `key`: the request's `Idempotency-Key`; its answer is stored with the nonce.
    func answer(_ request: HTTPRequest, app: AppPolicy, key: IdempotentWrite?) async throws(VerificationError) -> HTTPResponse {
        let account = try RequestBody(request, allowed: ["account"]).account()
        let nonce = try await ledger.issueNonce(bundleId: app.bundleId, account: account,
                                                ttlSeconds: Int(app.noncePolicy.ttlSeconds), now: now(),
                                                keyed: key.map { ($0, Self.body) })
        return .json(200, Self.body(nonce))
    }

    @Sendable private static func body(_ nonce: IssuedNonce) -> String { answer.encode(nonce).jsonText }

    static let answer = JSONShape<IssuedNonce>.object([
        .required("nonce", .string) { $0.value },
        .required("expiresAt", .integer) { $0.expiresAt },
    ]).named("Nonce")
}

extension NoncesEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route("POST", "/v1/apps/{bundleId}/nonces", name: "nonces", body: "NonceRequest", answer: answer,
              summary: "Issue a single-use nonce bound to an account, to send with a receipt",
              handler: .keyed { endpoints, request, app, key throws(VerificationError) in
                  try await endpoints.nonces.answer(request, app: app, key: key)
              }),
    ]
}
