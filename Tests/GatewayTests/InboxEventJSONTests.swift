import Foundation
import IAPCore
@testable import Ledger
import XCTest

/// The inbox's `event_json` is written without JSONEncoder (issue 14: it was a sixth of the route's
/// CPU beside the verifies), and must stay exactly the text JSONEncoder wrote: stored rows compare
/// and replay as text.
final class InboxEventJSONTests: XCTestCase {
    private static func encoderText(_ event: LifecycleEvent) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(event), as: UTF8.self)
    }

    /// Every notification type the simulator signs, through the route into the inbox: each stored
    /// `event_json` is what JSONEncoder writes for the event it holds.
    func testStoredEventOfEveryNotificationTypeIsJSONEncodersText() async throws {
        let e2e = try await NotificationE2E.start(self)
        let purchases = [try e2e.subscribe(owner: "device-ivy", trial: true),
                         try e2e.subscribe(owner: "device-jo", familyShared: true, environment: .sandbox),
                         try e2e.buyConsumable(owner: "device-kit")]
        for (i, (type, subtype)) in NotificationIntegrityTests.everyKnownType.enumerated() {
            let answer = try await e2e.post(signedPayload: try await e2e.signed(type, subtype, about: purchases[i % purchases.count]))
            XCTAssertEqual(answer.status, 200, "\(type) \(subtype ?? ""): \(answer.text)")
        }
        let stored = try TestStorage(backend: .sqlite(path: e2e.gw.sqlitePath))
            .rows("SELECT event_json FROM notification_inbox WHERE event_json IS NOT NULL").map { $0[0] }
        XCTAssertGreaterThan(stored.count, NotificationIntegrityTests.everyKnownType.count / 2)
        for text in stored {
            let event = try JSONDecoder().decode(LifecycleEvent.self, from: Data(text.utf8))
            XCTAssertEqual(text, try Self.encoderText(event))
        }
    }

    /// Every member set, strings that need every kind of escape, Apple's nested objects: the same
    /// bytes as JSONEncoder; and every stored property is in the text (a property the record's
    /// field table lacks would be dropped silently).
    func testFullyPopulatedEventWithEscapesIsJSONEncodersText() throws {
        var controls = ""
        for value in 0..<0x20 { controls.unicodeScalars.append(Unicode.Scalar(UInt8(value))) }
        let awkward = controls + "\"\\/\u{7F}\u{2028}é😀 end"
        let nested: JSONValue = .object(["commitmentExpiresDate": .int(1_700_000_000_000), "b": .array([.null, .bool(true), .string(awkward)]),
                                         "a": .object([:]), "Z": .array([]), "é": .bool(false)])
        var t = CanonicalTransaction(transactionId: "2000000\(awkward)", productId: "com.example/pro", source: "serverAPI",
                                     mappingVersion: "serverAPI/v1")
        t.originalTransactionId = "1"; t.webOrderLineItemId = "w"; t.bundleId = "b"; t.appAppleId = Int64.max
        t.subscriptionGroupIdentifier = "g"; t.type = .autoRenewable; t.purchaseDate = Int64.min; t.originalPurchaseDate = 0
        t.expiresDate = 3; t.quantity = 1; t.inAppOwnershipType = .familyShared; t.isUpgraded = false
        t.offerType = .winBack; t.offerIdentifier = awkward; t.offerDiscountType = .freeTrial; t.revocationDate = 4
        t.revocationReason = .appIssue; t.environment = .sandbox; t.appAccountToken = "a"; t.storefront = "USA"
        t.price = -990; t.currency = "USD"; t.transactionReason = .renewal; t.signedDate = 5; t.appTransactionId = "at"
        t.offerPeriod = "P1M"; t.revocationType = .refundProrated; t.revocationPercentage = 50_000; t.billingPlanType = .monthly
        t.commitmentInfo = nested; t.advancedCommerceInfo = .object(["items": .array([nested])])
        var r = CanonicalRenewal(originalTransactionId: "1", source: "serverAPI", mappingVersion: "serverAPI/v1")
        r.productId = "p"; r.autoRenewProductId = "q"; r.autoRenewStatus = .on; r.expirationIntent = .billingError
        r.isInBillingRetryPeriod = true; r.gracePeriodExpiresDate = 6; r.priceIncreaseStatus = .consented
        r.offerType = .introductory; r.offerIdentifier = "o"; r.offerDiscountType = .payAsYouGo; r.renewalDate = 7
        r.renewalPrice = 8; r.currency = "EUR"; r.environment = .production; r.signedDate = 9; r.appTransactionId = "at"
        r.appAccountToken = awkward; r.offerPeriod = "P1Y"; r.eligibleWinBackOfferIds = ["w1", awkward, ""]
        r.renewalBillingPlanType = .billedUpfront; r.commitmentInfo = nested; r.advancedCommerceInfo = .object([:])
        let full = LifecycleEvent(id: awkward, bundleId: "com.example.app", notificationType: .didRenew, subtype: .billingRecovery,
                                  signedDate: 1_700_000_000_123, environment: .sandbox, transaction: t, renewal: r)
        let bare = LifecycleEvent(id: "u", bundleId: "b", notificationType: .test, subtype: nil, signedDate: 0,
                                  environment: .production, transaction: nil,
                                  renewal: CanonicalRenewal(originalTransactionId: "1", source: "s", mappingVersion: "m"))
        // A fractional number: JSONEncoder's own digits (the writer hands such an event to it).
        var fractional = full
        fractional.transaction?.advancedCommerceInfo = .object(["price": .double(0.1)])
        for event in [full, bare, fractional] {
            XCTAssertEqual(try NotificationJSON.eventText(event), try Self.encoderText(event))
        }

        let document = try StrictJSON().parse(Array(try NotificationJSON.eventText(full).utf8))
        let parts: [(Any, JSONValue?)] = [(full, document), (t, document["transaction"]), (r, document["renewal"])]
        for (value, json) in parts {
            let labels = Set(Mirror(reflecting: value).children.compactMap(\.label))
            XCTAssertEqual(Set(json?.objectValue?.keys.map { $0 } ?? []), labels, "\(type(of: value))")
        }
    }
}
