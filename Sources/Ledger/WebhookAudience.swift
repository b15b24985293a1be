import Foundation

/// The apps whose webhook events the outbox keeps: those with a receiver to deliver them to. An
/// event of an app without one would be written only to be marked delivered, unsent, one more
/// commit each, competing with every request for the writer.
public struct WebhookAudience: Hashable, Sendable {
    /// nil: every app (a ledger opened without the gateway's app policies: tools, tests).
    private let bundleIds: Set<String>?

    public static let everyApp = WebhookAudience(bundleIds: nil)

    public static func apps(_ bundleIds: some Sequence<String>) -> WebhookAudience {
        WebhookAudience(bundleIds: Set(bundleIds))
    }

    public func includes(_ bundleId: String) -> Bool { bundleIds?.contains(bundleId) ?? true }
}
