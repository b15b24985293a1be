import AppleTrust
@testable import AppStoreSimulator
import Foundation
import IAPCore
import UpstreamHTTP
import XCTest

/// A started simulator with one registered app, and small HTTP helpers (loopback only).
final class SimulatorFixture: @unchecked Sendable {
    static let bundleId = "com.example.sim"
    static let appAppleId: Int64 = 1_234_567_890
    static let sharedSecret = "0123456789abcdef0123456789abcdef"

    let sim: AppStoreSimulator
    let credentials: SimulatedAppCredentials
    let client: UpstreamHTTPClient

    init() async throws {
        sim = try AppStoreSimulator()
        credentials = try sim.registerApp(bundleId: Self.bundleId, appAppleId: Self.appAppleId, sharedSecret: Self.sharedSecret)
        try await sim.start(port: 0)
        client = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(requestTimeout: .seconds(10)))
    }

    func subscription(owner: String = "device-1", environment: AppStoreEnvironment = .production,
                      offer: SimulatedOffer? = nil) throws -> SimulatedPurchase {
        try sim.purchase(PurchaseRequest(bundleId: Self.bundleId, productId: "com.example.sim.monthly", type: .autoRenewable,
                                         owner: owner, environment: environment, subscriptionGroupIdentifier: "21000001",
                                         offer: offer))
    }

    func oneTime(_ productId: String, type: TransactionType, owner: String = "device-1",
                 environment: AppStoreEnvironment = .production) throws -> SimulatedPurchase {
        try sim.purchase(PurchaseRequest(bundleId: Self.bundleId, productId: productId, type: type, owner: owner,
                                         environment: environment))
    }

    func token(keyPEM: String? = nil, lifetime: TimeInterval = 1800, now: Date = Date()) throws -> String {
        try AppStoreServerAPIToken(privateKeyPEM: keyPEM ?? credentials.privateKeyPEM, keyId: credentials.keyId,
                                   issuerId: credentials.issuerId, bundleId: Self.bundleId, lifetime: lifetime,
                                   now: { now }).token()
    }

    func verifyReceipt(_ body: JSONValue, environment: String = "production") async throws -> (Int, [String: JSONValue]) {
        let r = try await client.send(UpstreamRequest(method: "POST", url: "\(sim.baseURL.absoluteString)/\(environment)/verifyReceipt",
                                                     headers: [("Content-Type", "application/json")],
                                                     body: Array(body.jsonText.utf8)))
        let json = r.body.isEmpty ? [:] : (try StrictJSON().parse(r.body).objectValue ?? [:])
        return (r.status, json)
    }

    func serverAPI(_ path: String, method: String = "GET", environment: String = "production", token: String?,
                   body: JSONValue? = nil) async throws -> UpstreamResponse {
        var headers: [(String, String)] = [("Content-Type", "application/json")]
        if let token { headers.append(("Authorization", "Bearer \(token)")) }
        return try await client.send(UpstreamRequest(method: method, url: "\(sim.baseURL.absoluteString)/\(environment)\(path)",
                                                    headers: headers, body: body.map { Array($0.jsonText.utf8) }))
    }

    func json(_ r: UpstreamResponse) throws -> [String: JSONValue] { try StrictJSON().parse(r.body).objectValue ?? [:] }

    func verifier(environments: Set<AppStoreEnvironment> = [.production, .sandbox]) throws -> SignedDataVerifier {
        try SignedDataVerifier(rootCertificates: [sim.rootCertificateDER], bundleId: Self.bundleId,
                               appAppleId: Self.appAppleId, environments: environments)
    }

    func stop() async { await sim.stop() }
}
