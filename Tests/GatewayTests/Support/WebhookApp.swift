@testable import IAPConfig

/// An app policy whose only part that matters is its webhook: `url`, signed with the secret in the
/// `HOOK_SECRET` environment variable (tests that drive a `WebhookDispatcher` themselves).
func webhookApp(_ bundleId: String, url: String) -> AppPolicy {
    AppPolicy(bundleId: bundleId, allowedEnvironments: [.production], trustRoots: .init(jws: [], receipts: []),
              productCatalog: [:], routing: .init(receipt: .legacy, transactionId: .serverAPI,
                                                  signedTransaction: .serverAPI, cutoverSampleRate: 0),
              noncePolicy: .init(requiredForReceipts: false, ttlSeconds: 60), familySharingPolicy: .allow,
              gracePeriodPolicy: .init(grantDuringGracePeriod: true, grantDuringBillingRetry: false),
              onlineChecks: false, localOnlyJWS: false, apiKey: .sha256(String(repeating: "0", count: 64)),
              webhook: .init(url: url, secret: SecretReference(.environmentVariable("HOOK_SECRET"))))
}
