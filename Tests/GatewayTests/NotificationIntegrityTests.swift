import AppStoreSimulator
@_spi(TestPKI) import AppleTrust
import Foundation
import IAPCore
import TestPKI
import TestSupport
import UpstreamHTTP
import XCTest

/// What the notification route takes and refuses, and that what it takes is applied once and in
/// the order of Apple's facts, not of delivery.
final class NotificationIntegrityTests: XCTestCase {
    /// Every notificationType/subtype of the issue's list, as Apple names them.
    static let everyKnownType: [(String, String?)] = [
        ("SUBSCRIBED", "INITIAL_BUY"), ("SUBSCRIBED", "RESUBSCRIBE"), ("DID_RENEW", nil), ("DID_RENEW", "BILLING_RECOVERY"),
        ("DID_CHANGE_RENEWAL_PREF", "UPGRADE"), ("DID_CHANGE_RENEWAL_PREF", "DOWNGRADE"), ("DID_CHANGE_RENEWAL_PREF", nil),
        ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED"), ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED"),
        ("OFFER_REDEEMED", "INITIAL_BUY"), ("OFFER_REDEEMED", "RESUBSCRIBE"), ("OFFER_REDEEMED", "UPGRADE"),
        ("OFFER_REDEEMED", "DOWNGRADE"), ("OFFER_REDEEMED", nil),
        ("DID_FAIL_TO_RENEW", "GRACE_PERIOD"), ("DID_FAIL_TO_RENEW", nil), ("GRACE_PERIOD_EXPIRED", nil),
        ("EXPIRED", "VOLUNTARY"), ("EXPIRED", "BILLING_RETRY"), ("EXPIRED", "PRICE_INCREASE"), ("EXPIRED", "PRODUCT_NOT_FOR_SALE"),
        ("PRICE_INCREASE", "PENDING"), ("PRICE_INCREASE", "ACCEPTED"), ("REFUND", nil), ("REFUND_DECLINED", nil),
        ("REFUND_REVERSED", nil), ("REVOKE", nil), ("CONSUMPTION_REQUEST", nil), ("RENEWAL_EXTENDED", nil),
        ("RENEWAL_EXTENSION", "SUMMARY"), ("RENEWAL_EXTENSION", "FAILURE"), ("ONE_TIME_CHARGE", nil), ("TEST", nil),
        ("EXTERNAL_PURCHASE_TOKEN", "UNREPORTED"), ("METADATA_UPDATE", nil), ("MIGRATION", nil), ("PRICE_CHANGE", nil),
        ("RESCIND_CONSENT", nil),
    ]

    func testEveryNotificationTypeIsAcceptedAndProcessedAndUnknownOnesAreStoredAndCounted() async throws {
        let e2e = try await NotificationE2E.start(self)
        let purchase = try e2e.subscribe(owner: "device-gus")
        let unknown: [(String, String?)] = [("SUBSCRIPTION_TELEPORTED", nil), ("DID_RENEW", "ON_THE_MOON")]

        for (type, subtype) in Self.everyKnownType + unknown {
            let answer = try await e2e.post(signedPayload: try await e2e.signed(type, subtype, about: purchase))
            XCTAssertEqual(answer.status, 200, "\(type) \(subtype ?? ""): \(answer.text)")
            XCTAssertEqual(answer.json["status"]?.stringValue, "accepted")
        }
        try await e2e.waitUntilDrained()

        XCTAssertEqual(try e2e.inboxIds().count, Self.everyKnownType.count + unknown.count)
        let counted = try e2e.ledger.unknownNotificationCounts().filter { $0.bundleId == e2e.bundleId }
        XCTAssertEqual(Set(counted.map { "\($0.notificationType)/\($0.subtype ?? "")" }),
                       ["SUBSCRIPTION_TELEPORTED/", "DID_RENEW/ON_THE_MOON"])
        XCTAssertEqual(counted.map(\.count), [1, 1])
        let health = try await e2e.gw.get("/healthz")
        XCTAssertEqual(health.status, 200, "the gateway still answers after every type")
    }

    func testTheSameNotificationDeliveredThreeTimesIsStoredAndProcessedOnceWithOneWebhookPerKey() async throws {
        let e2e = try await NotificationE2E.start(self)
        let purchase = try e2e.subscribe(owner: "device-hal")
        try await e2e.claim(purchase, account: "hal")
        let renewal = try e2e.simulator.renew(originalTransactionId: purchase.originalTransactionId)
        let payload = try await e2e.signed("DID_RENEW", about: renewal)
        let uuid = try XCTUnwrap(try jwsPayload(payload)["notificationUUID"]?.stringValue)

        let first = try await e2e.post(signedPayload: payload)
        let second = try await e2e.post(signedPayload: payload)
        try await e2e.waitUntilDrained()
        let afterProcessing = try await e2e.post(signedPayload: payload)

        XCTAssertEqual([first.status, second.status, afterProcessing.status], [200, 200, 200])
        XCTAssertEqual([first, second, afterProcessing].map { $0.json["status"]?.stringValue },
                       ["accepted", "duplicate", "duplicate"])
        XCTAssertEqual(try e2e.inboxIds().filter { $0 == uuid }.count, 1)
        let key = "entitlementChanged:\(purchase.originalTransactionId.utf8.count):\(purchase.originalTransactionId):\(uuid)"
        try await e2e.eventually("the renewal's webhook is delivered") { e2e.webhooks.accepted.contains { $0.idempotencyKey == key } }
        try await e2e.waitUntilDrained()
        try await Task.sleep(for: .milliseconds(600))  // two dispatcher ticks: room for a wrong second delivery
        let keys = e2e.webhooks.deliveries.map(\.idempotencyKey)
        XCTAssertEqual(keys.filter { $0 == key }.count, 1, keys.joined(separator: "\n"))
        XCTAssertEqual(Set(keys).count, keys.count, "one delivery per idempotency key")
        let now = try await e2e.summary("hal", chain: purchase.originalTransactionId)
        XCTAssertEqual(now?.expiresDate, try expiresDate(of: renewal))
    }

    /// One lifecycle, built in Apple's order: the signed notifications of every step.
    private func lifecycle(_ e2e: NotificationE2E, owner: String, account: String) async throws -> (chain: String, payloads: [String]) {
        let sim = e2e.simulator
        let start = try e2e.subscribe(owner: owner)
        try await e2e.claim(start, account: account)
        let chain = start.originalTransactionId
        var payloads = [try await e2e.signed("SUBSCRIBED", "INITIAL_BUY", about: start)]
        payloads.append(try await e2e.signed("DID_RENEW", about: try sim.renew(originalTransactionId: chain)))
        payloads.append(try await e2e.signed("DID_CHANGE_RENEWAL_PREF", "UPGRADE",
                                             about: try sim.changeProduct(originalTransactionId: chain, to: NotificationE2E.premium)))
        payloads.append(try await e2e.signed("DID_FAIL_TO_RENEW", "GRACE_PERIOD", about: try sim.expire(
            originalTransactionId: chain, intent: 2, billingRetry: true, gracePeriodSeconds: 16 * 86_400)))
        payloads.append(try await e2e.signed("DID_RENEW", "BILLING_RECOVERY", about: try sim.renew(originalTransactionId: chain)))
        payloads.append(try await e2e.signed("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED",
                                             about: try sim.changeRenewalPreference(originalTransactionId: chain, autoRenew: false)))
        return (chain, payloads)
    }

    func testALifecycleDeliveredShuffledEndsInTheSameEntitlementAsInOrder() async throws {
        let e2e = try await NotificationE2E.start(self)
        let inOrder = try await lifecycle(e2e, owner: "device-ivy", account: "ivy")
        for payload in inOrder.payloads { try await e2e.deliver(payload) }
        let expected = try await e2e.summary("ivy", chain: inOrder.chain)
        XCTAssertEqual(expected?.productId, NotificationE2E.premium)
        XCTAssertEqual(expected?.state, "active")

        var generator = SplitMix(seed: 0x1A9_6A7E)
        let orders: [(String, ([String]) -> [String])] = [
            ("reversed", { $0.reversed() }), ("shuffled", { $0.shuffled(using: &generator) }),
        ]
        for (index, (name, reorder)) in orders.enumerated() {
            let account = "jo\(index)"
            let shuffled = try await lifecycle(e2e, owner: "device-\(account)", account: account)
            // One at a time, each processed before the next arrives: the processor cannot re-sort them.
            for payload in reorder(shuffled.payloads) { try await e2e.deliver(payload) }
            let got = try await e2e.summary(account, chain: shuffled.chain)
            XCTAssertEqual(got?.productId, expected?.productId, name)
            XCTAssertEqual(got?.state, expected?.state, name)
            XCTAssertEqual(got?.grantsAccess, expected?.grantsAccess, name)
            let lastExpiry = try jwsPayload(try XCTUnwrap(jwsPayload(shuffled.payloads[4])["data"]?["signedTransactionInfo"]?.stringValue))["expiresDate"]
            XCTAssertEqual(got?.expiresDate.map(JSONValue.int), lastExpiry, "\(name): the recovery's period, as in order")
        }
    }

    // MARK: Forgeries

    /// A genuine notification whose payload is changed by `edit` and signed again by `outer`.
    private func reSigned(_ genuine: String, outer: TestPKI.JWSSigner,
                          edit: (inout [String: JSONValue]) throws -> Void = { _ in }) throws -> String {
        guard case .object(var payload) = try jwsPayload(genuine) else { throw VerificationError(.malformedJWS, "payload") }
        try edit(&payload)
        return try outer.sign(.object(payload))
    }

    func testForgedInnerTransactionInsideAGenuineOuterPayloadIsRefusedAndNothingIsStored() async throws {
        let e2e = try await NotificationE2E.start(self)
        let purchase = try e2e.subscribe(owner: "device-kim")
        let genuine = try await e2e.signed("DID_RENEW", about: try e2e.simulator.renew(originalTransactionId: purchase.originalTransactionId))
        let impostor = try TestPKI.CertificateAuthority.make(rootName: "Not Apple Root CA")
        let impostorSigner = impostor.signer(leaf: try impostor.issueLeaf(commonName: "Not Apple StoreKit Signing"))
        let before = try e2e.inboxIds()

        let forged = try reSigned(genuine, outer: e2e.simulator.pki.jwsSigner) { payload in
            guard case .object(var data) = payload["data"], let inner = data["signedTransactionInfo"]?.stringValue,
                  case .object(var transaction) = try jwsPayload(inner) else { throw VerificationError(.malformedJWS, "data") }
            transaction["expiresDate"] = .int(4_102_444_800_000)  // 2100: what a forger would want
            data["signedTransactionInfo"] = .string(try impostorSigner.sign(.object(transaction)))
            payload["data"] = .object(data)
        }
        let answer = try await e2e.post(signedPayload: forged)

        XCTAssertEqual(answer.status, 422, answer.text)
        XCTAssertEqual(answer.errorCode, "UNTRUSTED_ROOT", answer.text)
        XCTAssertEqual(try e2e.inboxIds(), before)
        XCTAssertEqual(try e2e.ledger.inboxDepth().pending, 0)
        // Control: the same outer signature over the untouched payload is accepted, so the
        // refusal above came from the inner JWS alone.
        let control = try await e2e.post(signedPayload: try reSigned(genuine, outer: e2e.simulator.pki.jwsSigner))
        XCTAssertEqual(control.status, 200, control.text)
    }

    /// A V2 body exactly as Apple sends it skips the general JSON parse (`NotificationDecoder.canonicalV2`):
    /// the inbox row must be the same bytes either way, and the signatures are checked on both paths.
    func testAV2BodyIsKeptInItsCanonicalFormOnEitherPathAndATamperedOneIsRefusedOnEither() async throws {
        let e2e = try await NotificationE2E.start(self)
        let purchase = try e2e.subscribe(owner: "device-cy")
        let prefix = "{\"signedPayload\":\"", suffix = "\"}"
        func signed() async throws -> String {
            try await e2e.signed("DID_RENEW", about: try e2e.simulator.renew(originalTransactionId: purchase.originalTransactionId))
        }
        func stored(_ answer: GatewayAnswer) throws -> String? {
            let id = answer.json["notificationId"]?.stringValue
            return try e2e.ledger.inboxEntries(bundleId: e2e.bundleId, since: 0, limit: 100)
                .first { $0.id == id }.map { String(decoding: $0.rawBody, as: UTF8.self) }
        }
        let asApple = try await signed(), spaced = try await signed(), escaped = try await signed()
        let bodies = [
            (asApple, prefix + asApple + suffix),
            (spaced, "{ \"signedPayload\" : \"" + spaced + "\" }\n"),
            // A JSON escape in the JWS: not the canonical shape, so parsed (and unescaped) as JSON.
            (escaped, prefix + escaped.replacingOccurrences(of: ".", with: "\\u002e") + suffix),
        ]
        for (jws, body) in bodies {
            let answer = try await e2e.postRaw(Array(body.utf8))
            XCTAssertEqual(answer.status, 200, answer.text)
            XCTAssertEqual(try stored(answer), prefix + jws + suffix, body.prefix(40) + "…")
        }

        let before = try e2e.inboxIds()
        let tampered = try await signed()
        var characters = Array(tampered)  // one signature character changed, well inside its last segment
        characters[characters.count - 10] = characters[characters.count - 10] == "A" ? "B" : "A"
        let flipped = String(characters)
        for body in [prefix + flipped + suffix, "{ \"signedPayload\": \"" + flipped + "\"}"] {
            let answer = try await e2e.postRaw(Array(body.utf8))
            XCTAssertEqual(answer.status, 422, answer.text)
            XCTAssertEqual(answer.errorCode, "INVALID_SIGNATURE", answer.text)
        }
        XCTAssertEqual(try e2e.inboxIds(), before)
    }

    func testOuterPayloadSignedByAnUntrustedChainIsRefusedAndNothingIsStored() async throws {
        let e2e = try await NotificationE2E.start(self)
        let purchase = try e2e.subscribe(owner: "device-lu")
        let genuine = try await e2e.signed("REFUND", about: try e2e.simulator.refund(transactionId: purchase.transactionId))
        let impostor = try TestPKI.CertificateAuthority.make(rootName: "Not Apple Root CA")
        let forged = try reSigned(genuine, outer: impostor.signer(leaf: try impostor.issueLeaf(commonName: "Not Apple")))

        let answer = try await e2e.post(signedPayload: forged)

        XCTAssertEqual(answer.status, 422, answer.text)
        XCTAssertEqual(answer.errorCode, "UNTRUSTED_ROOT", answer.text)
        XCTAssertEqual(try e2e.inboxIds(), [])
    }

    // MARK: V1

    func testV1NotificationWithTheSharedSecretIsAppliedAndAWrongPasswordIsRefusedWith401() async throws {
        let e2e = try await NotificationE2E.start(self)
        let purchase = try e2e.subscribe(owner: "device-mo")
        try await e2e.claim(purchase, account: "mo")
        let renewal = try e2e.simulator.renew(originalTransactionId: purchase.originalTransactionId)

        let wrong = try await e2e.postRaw(try await e2e.v1Body(type: "DID_RENEW", owner: "device-mo", password: "not-the-secret"))
        XCTAssertEqual(wrong.status, 401, wrong.text)
        XCTAssertEqual(wrong.errorCode, "UNAUTHENTICATED")
        XCTAssertEqual(try e2e.inboxIds(), [])
        XCTAssertFalse(wrong.text.contains(e2e.gw.harness.sharedSecret))

        let right = try await e2e.postRaw(try await e2e.v1Body(type: "DID_RENEW", owner: "device-mo",
                                                           password: e2e.gw.harness.sharedSecret))
        XCTAssertEqual(right.status, 200, right.text)
        try await e2e.waitUntilDrained()
        XCTAssertEqual(try e2e.inboxIds().count, 1)
        let now = try await e2e.summary("mo", chain: purchase.originalTransactionId)
        XCTAssertEqual(now?.state, "active")
        XCTAssertEqual(now?.expiresDate, try expiresDate(of: renewal))
    }
}
