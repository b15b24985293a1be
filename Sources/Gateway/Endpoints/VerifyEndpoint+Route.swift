import HTTPServer
import IAPCore

extension VerifyEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route(method: "POST", path: "/v1/apps/{bundleId}/verify", name: "verify",
              operation: OpenAPIOperation(
                summary: "Verify purchase evidence, bind it to the account and answer its entitlements",
                requestBody: "VerifyRequest",
                responses: [
                    "200": .ok("VerifyResponse"),
                    "409": .error("bound to another account (TRANSACTION_BOUND_TO_OTHER_ACCOUNT)"),
                    "413": .error("body too large (INPUT_TOO_LARGE)"),
                    "422": .error("the evidence was refused, its content included (see the error code)"),
                    "500": .error("the gateway's configuration or an internal fault (INVALID_CONFIGURATION, INTERNAL_ERROR); not retryable"),
                    "502": .error("Apple refused the gateway's credentials (UPSTREAM_CREDENTIALS_REJECTED) or answered in a shape the gateway cannot use (UPSTREAM_INVALID_RESPONSE)"),
                    "503": .error("Apple or storage unavailable (nothing was stored), or Apple's Retry-After is beyond the request's budget; see Retry-After (Apple's own when it sent one). STORAGE_OUTCOME_UNKNOWN: the storage did not confirm a commit sent; retry with the same Idempotency-Key to learn its outcome"),
                ]),
              handler: .keyed { endpoints, request, app, key throws(VerificationError) in
                  try await endpoints.verify.answer(request, app: app, key: key)
              }),
    ]
}
