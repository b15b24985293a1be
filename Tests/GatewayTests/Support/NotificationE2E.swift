import AppStoreSimulator
import AppleTrust
import Demo
import Foundation
import Gateway
import HTTPServer
import IAPCore
import Ledger
import Synchronization
import TestSupport
import UpstreamHTTP
import XCTest

/// Wall-clock milliseconds that never repeat: the simulator's events, made one after another,
/// get distinct signedDates, so "which came later" is never decided by a tie-breaker.
final class StrictlyIncreasingClock: Sendable {
    private let lastMs = Mutex<Int64>(0)

    var now: @Sendable () -> Date {
        { [self] in
            let wall = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
            let ms = lastMs.withLock { last in last = max(last + 1, wall); return last }
            return Date(timeIntervalSince1970: Double(ms) / 1000)
        }
    }
}

/// The app backend's side of the webhooks: a loopback HTTP server that answers 503 to the first
/// `failFirst` deliveries, then 200, and records every delivery with its signature check. While
/// held, it answers nothing (a receiver that hangs), noting only which events arrived.
final class WebhookReceiver: Sendable {
    struct Delivery: Sendable {
        let idempotencyKey: String
        let answered: Int
        let signatureValid: Bool
        let body: JSONValue
        var kind: String? { body["kind"]?.stringValue }
    }

    private struct State {
        var failuresLeft: Int
        var secret: String?
        var deliveries: [Delivery] = []
        var holding = false
        var heldKeys: [String] = []
    }

    private let state: Mutex<State>
    private let server: Mutex<HTTPServer?> = Mutex(nil)

    init(failFirst: Int = 0) {
        state = Mutex(State(failuresLeft: failFirst))
    }

    func start(_ test: XCTestCase) throws {
        let s = try HTTPServer(configuration: HTTPServerConfiguration(port: 0)) { [self] request in await answer(request) }
        try s.start()
        server.withLock { $0 = s }
        test.addTeardownBlock { await s.shutdown(gracePeriod: .seconds(1)) }
    }

    var url: String { "http://127.0.0.1:\(server.withLock { $0?.port ?? 0 })/hooks/iap" }

    /// The gateway's signing key is generated when the deployment starts, after the URL is known.
    func expectSecret(_ secret: String) { state.withLock { $0.secret = secret } }

    var deliveries: [Delivery] { state.withLock { $0.deliveries } }
    var accepted: [Delivery] { deliveries.filter { $0.answered == 200 } }

    /// From now on requests wait unanswered until `release()` (then they get a 503, to a sender that
    /// may be gone by then); `heldKeys` lists their idempotency keys.
    func hold() { state.withLock { $0.holding = true } }
    func release() { state.withLock { $0.holding = false } }
    var heldKeys: [String] { state.withLock { $0.heldKeys } }

    private func answer(_ request: HTTPRequest) async -> HTTPResponse {
        let held = state.withLock { s in
            if s.holding { s.heldKeys.append(request.headers["Idempotency-Key"] ?? "") }
            return s.holding
        }
        guard held else { return receive(request) }
        while state.withLock({ $0.holding }) { try? await Task.sleep(for: .milliseconds(20)) }
        return HTTPResponse(status: 503)
    }

    private func receive(_ request: HTTPRequest) -> HTTPResponse {
        let body = String(decoding: request.body, as: UTF8.self)
        return state.withLock { s in
            let timestamp = request.headers["X-IAPGW-Timestamp"] ?? ""
            let presented = request.headers["X-IAPGW-Signature"] ?? ""
            let valid = s.secret.map { WebhookDispatcher.signature(secret: $0, timestamp: timestamp, body: body) == presented } ?? false
            let status: Int
            if s.failuresLeft > 0 { s.failuresLeft -= 1; status = 503 } else { status = 200 }
            s.deliveries.append(Delivery(idempotencyKey: request.headers["Idempotency-Key"] ?? "", answered: status,
                                         signatureValid: valid, body: (try? StrictJSON().parse(request.body)) ?? .null))
            return HTTPResponse(status: status)
        }
    }
}

/// A demo deployment with a webhook receiver and a clock fit for notification tests, plus the
/// moves of a notification test: post what the simulator signs, wait for the processor, read back.
struct NotificationE2E {
    let gw: GatewayE2E
    let webhooks: WebhookReceiver
    let ledger: SQLLedger

    static let premium = "com.example.demo.pro.premium"
    static let coins = "com.example.demo.coins100"

    var simulator: AppStoreSimulator { gw.simulator }
    var bundleId: String { gw.bundleId }

    static func start(_ test: XCTestCase, failFirstWebhooks: Int = 0,
                      configure: (inout DemoHarness.Options) -> Void = { _ in }) async throws -> NotificationE2E {
        let webhooks = WebhookReceiver(failFirst: failFirstWebhooks)
        try webhooks.start(test)
        let clock = StrictlyIncreasingClock()
        let gw = try await GatewayE2E.start(test) { options in
            options.webhookURL = webhooks.url
            options.simulatorClock = clock.now
            options.catalog.append((premium, .autoRenewable, 9_990, "USD"))
            configure(&options)
        }
        webhooks.expectSecret(gw.harness.webhookSecret)
        return NotificationE2E(gw: gw, webhooks: webhooks, ledger: try SQLLedger(storage: "sqlite:" + gw.sqlitePath))
    }

    // MARK: Purchases

    func subscribe(owner: String, trial: Bool = false, familyShared: Bool = false,
                   environment: AppStoreEnvironment = .production) throws -> SimulatedPurchase {
        try simulator.purchase(PurchaseRequest(
            bundleId: bundleId, productId: GatewayE2E.monthly, type: .autoRenewable, owner: owner, environment: environment,
            subscriptionGroupIdentifier: "demo.pro", price: 4_990, offer: trial ? .freeTrial : nil, familyShared: familyShared))
    }

    func buyConsumable(owner: String) throws -> SimulatedPurchase {
        try simulator.purchase(PurchaseRequest(bundleId: bundleId, productId: Self.coins, type: .consumable,
                                               owner: owner, price: 990))
    }

    /// Binds the purchase to `account` the way the app does (verify by transaction id).
    func claim(_ purchase: SimulatedPurchase, account: String) async throws {
        let answer = try await gw.verifyTransactionId(purchase.transactionId, account: account)
        XCTAssertEqual(answer.status, 200, answer.text)
    }

    // MARK: Notifications

    /// What Apple would send now about `purchase` (signed by the simulator's PKI, not yet posted).
    func signed(_ type: String, _ subtype: String? = nil, about purchase: SimulatedPurchase) async throws -> String {
        try await simulator.sendNotification(type: type, subtype: subtype, purchase: purchase, to: nil)
    }

    func post(signedPayload: String) async throws -> GatewayAnswer {
        try await postRaw(Array(JSONValue.object(["signedPayload": .string(signedPayload)]).jsonText.utf8))
    }

    func postRaw(_ body: [UInt8]) async throws -> GatewayAnswer {
        try await gw.send("POST", gw.harness.notificationURL, body: body, apiKey: .some(nil))
    }

    /// Signs, posts (expecting 200) and waits until the processor has applied it.
    @discardableResult
    func deliver(_ type: String, _ subtype: String? = nil, about purchase: SimulatedPurchase,
                 file: StaticString = #filePath, line: UInt = #line) async throws -> String {
        let payload = try await signed(type, subtype, about: purchase)
        try await deliver(payload, file: file, line: line)
        return payload
    }

    func deliver(_ signedPayload: String, file: StaticString = #filePath, line: UInt = #line) async throws {
        let answer = try await post(signedPayload: signedPayload)
        XCTAssertEqual(answer.status, 200, answer.text, file: file, line: line)
        try await waitUntilDrained(file: file, line: line)
    }

    /// A V1 body: the legacy fields around what verifyReceipt (of `environment`) answers for the
    /// owner's receipt.
    func v1Body(type: String, owner: String, password: String, environment: AppStoreEnvironment = .production)
        async throws -> [UInt8] {
        let receipt = try simulator.receipt(owner: owner, bundleId: bundleId, environment: environment)
        let request = JSONValue.object(["receipt-data": .string(receipt), "password": .string(gw.harness.sharedSecret),
                                        "exclude-old-transactions": .bool(true)])
        let url = environment == .sandbox ? simulator.sandboxVerifyReceiptURL : simulator.productionVerifyReceiptURL
        let response = try await gw.client.send(UpstreamRequest(
            method: "POST", url: url, headers: [("Content-Type", "application/json")], body: Array(request.jsonText.utf8)))
        guard case .object(var unified) = try StrictJSON().parse(response.body) else { throw VerificationError(.malformedRequest, "verifyReceipt") }
        XCTAssertEqual(unified["status"], .int(0))
        unified.removeValue(forKey: "receipt")
        return Array(JSONValue.object([
            "notification_type": .string(type), "password": .string(password),
            "environment": .string(environment == .sandbox ? "Sandbox" : "PROD"),
            "bid": .string(bundleId), "unified_receipt": .object(unified),
        ]).jsonText.utf8)
    }

    func waitUntilDrained(file: StaticString = #filePath, line: UInt = #line) async throws {
        try await eventually("the inbox drains", file: file, line: line) { try ledger.inboxDepth().pending == 0 }
        XCTAssertEqual(try ledger.inboxDepth().parked, 0, "no notification may be parked", file: file, line: line)
    }

    /// Polls `condition` for up to `seconds` (the processor and dispatcher run on their own ticks).
    func eventually(_ what: String, seconds: Double = 5, file: StaticString = #filePath, line: UInt = #line,
                    _ condition: () async throws -> Bool) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        XCTFail("timed out waiting until \(what)", file: file, line: line)
    }

    // MARK: Reading back

    func entitlement(_ account: String, chain: String) async throws -> JSONValue? {
        try await gw.entitlements(account).first { $0["originalTransactionId"]?.stringValue == chain }
    }

    /// The parts of an entitlement the app acts on.
    func summary(_ account: String, chain: String) async throws -> EntitlementSummary? {
        try await entitlement(account, chain: chain).map(EntitlementSummary.init)
    }

    func inboxIds() throws -> [String] {
        try ledger.inboxEntries(bundleId: bundleId, since: 0, limit: 10_000).map(\.id)
    }
}

struct EntitlementSummary: Equatable, CustomStringConvertible {
    let productId: String?
    let state: String?
    let grantsAccess: Bool?
    let expiresDate: Int64?

    init(_ json: JSONValue) {
        productId = json["productId"]?.stringValue
        state = json["state"]?.stringValue
        grantsAccess = json["grantsAccess"].flatMap { if case .bool(let b) = $0 { b } else { nil } }
        expiresDate = json["expiresDate"].flatMap { if case .int(let i) = $0 { i } else { nil } }
    }

    var description: String { "\(productId ?? "-") \(state ?? "-") access=\(grantsAccess.map(String.init) ?? "-")" }
}

/// Reads a compact JWS's payload without verifying it (the test made it).
func jwsPayload(_ jws: String) throws -> JSONValue {
    let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
    XCTAssertEqual(parts.count, 3)
    return try StrictJSON().parse(try Base64URL.decode(parts[1]))
}

func expiresDate(of purchase: SimulatedPurchase) throws -> Int64? {
    if case .int(let ms) = try jwsPayload(purchase.signedTransaction)["expiresDate"] { return ms }
    return nil
}
