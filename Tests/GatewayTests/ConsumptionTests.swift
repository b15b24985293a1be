import Adapters
import AppStoreSimulator
import Foundation
@testable import Gateway
@testable import IAPConfig
import IAPCore
import Ledger
import TestSupport
import XCTest

/// CONSUMPTION_REQUEST: answered through Send Consumption Information once, within Apple's
/// 12-hour window, only for apps whose policy says so.
final class ConsumptionTests: XCTestCase {
    func testConsumptionRequestIsAnsweredOnceWithinTheWindowOnlyWhereThePolicyEnablesIt() async throws {
        let gw = try await GatewayE2E.start(self)
        let parts = gw.harness.parts
        let coins = try gw.simulator.purchase(PurchaseRequest(
            bundleId: gw.bundleId, productId: "com.example.demo.coins100", type: .consumable, owner: "device-erin", price: 990))
        let claimed = try await gw.verifyTransactionId(coins.transactionId, account: "erin")
        XCTAssertEqual(claimed.status, 200, claimed.text)
        try await gw.simulator.sendNotification(type: "CONSUMPTION_REQUEST", purchase: coins, to: gw.harness.notificationURL)
        try await gw.waitUntilInboxIsDrained()
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let pending = try parts.storedLedger.pendingConsumptionRequests(notBefore: now - ConsumptionResponder.windowMillis, limit: 10)
        XCTAssertEqual(pending.map(\.transactionId), [coins.transactionId])

        var enabled = parts.apps
        enabled[gw.bundleId]?.consumptionResponse = AppPolicy.ConsumptionResponse()
        let serverAPI = parts.adapters.capability((any ReconciliationSource).self)
        func responder(_ apps: [String: AppPolicy], at time: Int64) -> ConsumptionResponder {
            ConsumptionResponder(apps: apps, ledger: parts.ledger, serverAPI: serverAPI, now: { time })
        }
        var failures: [String] = []

        let withoutPolicy = await responder(parts.apps, at: now).answerPending(failures: &failures)
        let pastTheWindow = await responder(enabled, at: now + ConsumptionResponder.windowMillis + 60_000)
            .answerPending(failures: &failures)
        let answered = await responder(enabled, at: now).answerPending(failures: &failures)
        let again = await responder(enabled, at: now).answerPending(failures: &failures)

        XCTAssertEqual(failures, [])
        XCTAssertEqual(withoutPolicy, 0)
        XCTAssertEqual(pastTheWindow, 0)
        XCTAssertEqual(answered, 1)
        XCTAssertEqual(again, 0)
        XCTAssertEqual(try parts.storedLedger.pendingConsumptionRequests(notBefore: 0, limit: 10), [])
    }

    func testConsumptionBodyDeclaresOnlyWhatThePolicyStatesAndLeavesTheRestUndeclared() {
        var policy = AppPolicy.ConsumptionResponse()
        policy.refundPreference = 2
        policy.sampleContentProvided = true

        let body = ConsumptionResponder.body(policy)

        XCTAssertEqual(body, .object([
            "customerConsented": .bool(true), "consumptionStatus": .int(0), "platform": .int(1),
            "sampleContentProvided": .bool(true), "deliveryStatus": .int(0), "appAccountToken": .string(""),
            "accountTenure": .int(0), "playTime": .int(0), "lifetimeDollarsRefunded": .int(0),
            "lifetimeDollarsPurchased": .int(0), "userStatus": .int(0), "refundPreference": .int(2),
        ]))
    }

    func testAppFileEnablesConsumptionAnswersOnlyWithTheCustomersConsentStated() async throws {
        let gw = try await GatewayE2E.start(self)
        let appFile = gw.harness.directory.appendingPathComponent("apps/\(gw.bundleId).xml")
        let original = try String(contentsOf: appFile, encoding: .utf8)
        func load(_ setting: String) throws -> AppPolicy? {
            try original.replacingOccurrences(of: "</app>", with: setting + "\n</app>")
                .write(to: appFile, atomically: true, encoding: .utf8)
            return try ConfigLoader.loadAll(configDirectory: gw.harness.directory).apps[gw.bundleId]
        }

        let consented = try load("""
            <consumptionResponse><customerConsented type="bool">true</customerConsented>
            <refundPreference type="integer">2</refundPreference></consumptionResponse>
            """)
        let absent = try load("")

        XCTAssertEqual(consented?.consumptionResponse?.refundPreference, 2)
        XCTAssertEqual(consented?.consumptionResponse?.platform, 1)
        XCTAssertNil(absent?.consumptionResponse)
        XCTAssertThrowsError(try load("""
            <consumptionResponse><customerConsented type="bool">false</customerConsented></consumptionResponse>
            """)) { XCTAssertEqual(($0 as? VerificationError)?.code, .invalidConfiguration) }
    }
}
