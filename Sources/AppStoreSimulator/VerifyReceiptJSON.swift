import Foundation
import IAPCore

/// verifyReceipt's JSON, as Apple sends it: snake_case, every scalar in a record a string
/// ("quantity":"1", "is_trial_period":"false", "*_ms" digit strings), dates three ways.
enum VerifyReceiptJSON {
    static func dateFields(_ name: String, _ ms: Int64?, into o: inout [String: JSONValue]) {
        guard let ms else { return }
        o[name] = .string(format(ms, zone: "Etc/GMT", id: "UTC"))
        o[name + "_ms"] = .string(String(ms))
        o[name + "_pst"] = .string(format(ms, zone: "America/Los_Angeles", id: "America/Los_Angeles"))
    }

    static func format(_ ms: Int64, zone: String, id: String) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: id)
        f.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return f.string(from: Date(timeIntervalSince1970: Double(ms) / 1000)) + " " + zone
    }

    /// One element of `in_app` or `latest_receipt_info`.
    static func transaction(_ t: TransactionRecord, latestInfo: Bool) -> JSONValue {
        var o: [String: JSONValue] = [
            "quantity": .string(String(t.quantity)),
            "product_id": .string(t.productId),
            "transaction_id": .string(t.transactionId),
            "original_transaction_id": .string(t.originalTransactionId),
            "is_trial_period": .string(t.isTrialPeriod ? "true" : "false"),
            "in_app_ownership_type": .string(t.ownership.rawValue),
        ]
        dateFields("purchase_date", t.purchaseDate, into: &o)
        dateFields("original_purchase_date", t.originalPurchaseDate, into: &o)
        dateFields("expires_date", t.expiresDate, into: &o)
        dateFields("cancellation_date", t.revocationDate, into: &o)
        if t.revocationDate != nil, let reason = t.revocationReason { o["cancellation_reason"] = .string(String(reason)) }
        if t.type == .autoRenewable {
            o["is_in_intro_offer_period"] = .string(t.isInIntroOfferPeriod ? "true" : "false")
            o["web_order_line_item_id"] = t.webOrderLineItemId.map(JSONValue.string)
            if latestInfo {
                o["subscription_group_identifier"] = t.subscriptionGroupIdentifier.map(JSONValue.string)
                if t.isUpgraded { o["is_upgraded"] = .string("true") }
            }
        }
        if case .promotional(let id, _) = t.offer { o["promotional_offer_id"] = .string(id) }
        if case .offerCode(let name, _) = t.offer { o["offer_code_ref_name"] = .string(name) }
        o["app_account_token"] = t.appAccountToken.map(JSONValue.string)
        return .object(o)
    }

    static func pendingRenewal(_ c: SubscriptionChain, latest: TransactionRecord) -> JSONValue {
        var o: [String: JSONValue] = [
            "auto_renew_product_id": .string(c.autoRenewProductId),
            "auto_renew_status": .string(String(c.autoRenewStatus)),
            "original_transaction_id": .string(c.originalTransactionId),
            "product_id": .string(latest.productId),
        ]
        if let intent = c.expirationIntent {
            o["expiration_intent"] = .string(String(intent))
            o["is_in_billing_retry_period"] = .string(c.isInBillingRetryPeriod ? "1" : "0")
        }
        dateFields("grace_period_expires_date", c.gracePeriodExpiresDate, into: &o)
        return .object(o)
    }

    static func receipt(bundleId: String, appItemId: Int64, receiptType: String, appVersion: String,
                        creationDate: Int64, requestDate: Int64, originalPurchaseDate: Int64,
                        originalApplicationVersion: String, inApp: [TransactionRecord]) -> JSONValue {
        var o: [String: JSONValue] = [
            "receipt_type": .string(receiptType),
            "adam_id": .int(appItemId),
            "app_item_id": .int(appItemId),
            "bundle_id": .string(bundleId),
            "application_version": .string(appVersion),
            "download_id": .int(0),
            "version_external_identifier": .int(0),
            "original_application_version": .string(originalApplicationVersion),
            "in_app": .array(inApp.map { transaction($0, latestInfo: false) }),
        ]
        dateFields("receipt_creation_date", creationDate, into: &o)
        dateFields("request_date", requestDate, into: &o)
        dateFields("original_purchase_date", originalPurchaseDate, into: &o)
        return .object(o)
    }
}
