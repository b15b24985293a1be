import AppStoreSimulator
import Demo
import Foundation
import IAPCore
import IAPGatewayClient
import XCTest

/// The demo deployment (simulator + gateway through real config files on loopback) for one test,
/// torn down when the test ends, with the demo catalog's purchases.
struct ClientDeployment {
    let harness: DemoHarness

    static func start(_ test: XCTestCase, configure: (inout DemoHarness.Options) -> Void = { _ in }) async throws
        -> ClientDeployment {
        var options = DemoHarness.Options()
        configure(&options)
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("iapgw-client-\(UUID().uuidString)", isDirectory: true)
        let harness = try await DemoHarness.start(directory: directory, options: options)
        test.addTeardownBlock {
            await harness.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        return ClientDeployment(harness: harness)
    }

    func client(apiKey: String? = nil, transport: any IAPGatewayTransport = URLSessionTransport()) throws -> IAPGatewayClient {
        try IAPGatewayClient(baseURL: URL(string: harness.gatewayURL)!, bundleId: harness.bundleId,
                             apiKey: apiKey ?? harness.apiKey, timeout: .seconds(20), transport: transport)
    }

    static let monthly = "com.example.demo.pro.monthly"
    static let removeAds = "com.example.demo.removeads"

    /// A purchase at the demo catalog's price, so it passes every check.
    func buy(_ productId: String = ClientDeployment.monthly, owner: String, appAccountToken: UUID? = nil) throws
        -> SimulatedPurchase {
        let subscription = productId == Self.monthly
        return try harness.simulator.purchase(PurchaseRequest(
            bundleId: harness.bundleId, productId: productId, type: subscription ? .autoRenewable : .nonConsumable,
            owner: owner, subscriptionGroupIdentifier: subscription ? "demo.pro" : nil,
            price: subscription ? 4_990 : 2_990, appAccountToken: appAccountToken?.uuidString))
    }
}

/// The error a call threw, or a test failure if it did not throw one.
func refusal<T>(_ call: () async throws(IAPGatewayError) -> T, file: StaticString = #filePath,
                line: UInt = #line) async -> IAPGatewayError? {
    do {
        let value = try await call()
        XCTFail("expected a refusal, got \(value)", file: file, line: line)
        return nil
    } catch {
        return error
    }
}
