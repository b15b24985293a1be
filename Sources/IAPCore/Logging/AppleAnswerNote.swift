import Foundation

/// What Apple answered during one verification, for the audit trail: verifyReceipt's statuses
/// ("21007", then "0") and the Server API's failures ("HTTP 404 errorCode 4040010"), in order.
/// The verify endpoint binds one to the task (`AppleAnswerNote.$current`); the adapters note into
/// whichever is bound and do nothing when none is, so no signature between them changes.
public final class AppleAnswerNote: @unchecked Sendable {
    @TaskLocal public static var current: AppleAnswerNote?

    /// At most this many answers are kept (a verification makes a handful of calls).
    static let limit = 8
    private let lock = NSLock()
    private var answers: [String] = []

    public init() {}

    /// Notes `answer` on the bound note, if any. Callers pass numbers and fixed words only.
    public static func note(_ answer: String) {
        guard let note = current else { return }
        note.lock.withLock { if note.answers.count < limit { note.answers.append(answer) } }
    }

    /// The answers in order, space-separated; nil when Apple was not asked.
    public var summary: String? {
        lock.withLock { answers.isEmpty ? nil : answers.joined(separator: " ") }
    }
}
