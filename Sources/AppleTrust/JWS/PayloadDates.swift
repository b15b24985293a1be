import Foundation
import IAPCore

/// Apple's dates are integer milliseconds since 1970. A signed payload can still carry any Int64
/// (the signature proves who signed, not that the value is sane, and a forged token reaches the
/// date before it is refused), so every date is bounded before any arithmetic touches it: later
/// code (seconds, skew, `Date`, `time_t`) can then never overflow or trap.
enum PayloadDates {
    /// 2^42 ms ≈ year 2109: far beyond any certificate Apple will issue, far below any overflow.
    static let maxMs: Int64 = 1 << 42
    static let validMs: ClosedRange<Int64> = 0...maxMs

    /// Milliseconds to whole seconds, rounding down. Only for values inside `validMs`.
    static func floorSeconds(_ ms: Int64) -> Int64 { ms / 1000 }

    /// The clock in milliseconds, clamped into `validMs` (a clock set to NaN or year 300000 must not trap).
    static func milliseconds(_ date: Date) -> Int64 {
        let ms = (date.timeIntervalSince1970 * 1000).rounded(.down)
        guard ms.isFinite else { return ms > 0 ? maxMs : 0 }
        return Int64(min(max(ms, 0), Double(maxMs)))
    }

    /// `ms` if it lies within `validMs`, else INVALID_FIELD_TYPE naming it by `path`.
    static func checked(_ ms: Int64, at path: @autoclosure () -> String) throws(VerificationError) -> Int64 {
        guard validMs.contains(ms) else {
            throw VerificationError(.invalidFieldType, "\(path()) \(ms) is not a date between 1970 and 2109 in milliseconds")
        }
        return ms
    }
}

extension JSONFields {
    /// An optional date field: an integer within `PayloadDates.validMs`, or INVALID_FIELD_TYPE.
    func date(_ key: String) throws(VerificationError) -> Int64? {
        guard let ms = try int64(key) else { return nil }
        return try PayloadDates.checked(ms, at: "\(context).\(key)")
    }

    func requiredDate(_ key: String) throws(VerificationError) -> Int64 {
        guard let ms = try date(key) else { throw VerificationError(.missingField, "\(context).\(key) is required") }
        return ms
    }
}
