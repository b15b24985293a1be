import Foundation

/// HTTP-date (RFC 9110 §5.6.7): recipients must accept IMF-fixdate, RFC 850 and asctime forms.
/// Parsed by hand: fixed grammar, no locale, no DateFormatter state shared across threads.
public enum HTTPDate {
    public static func currentUnixTime() -> Double { Date().timeIntervalSince1970 }

    /// Seconds since 1970-01-01T00:00:00Z, or nil when the text is not an HTTP-date.
    public static func parse(_ text: String) -> Int? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let comma = trimmed.firstIndex(of: ",") {
            let rest = trimmed[trimmed.index(after: comma)...].split(separator: " ", omittingEmptySubsequences: false)
            // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" → ["", "06", "Nov", "1994", "08:49:37", "GMT"]
            if rest.count == 6, rest[0].isEmpty, rest[5] == "GMT", rest[1].count == 2, rest[3].count == 4 {
                return build(day: rest[1], month: rest[2], year: rest[3], time: rest[4])
            }
            // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT" → ["", "06-Nov-94", "08:49:37", "GMT"]
            if rest.count == 4, rest[0].isEmpty, rest[3] == "GMT" {
                let parts = rest[1].split(separator: "-", omittingEmptySubsequences: false)
                guard parts.count == 3, parts[0].count == 2, parts[2].count == 2, let yy = Int(parts[2]) else { return nil }
                // Two-digit years: RFC 9110 says pick the century that is not more than 50 years ahead.
                let year = yy < 70 ? 2000 + yy : 1900 + yy
                return build(day: parts[0], month: parts[1], year: Substring(String(year)), time: rest[2])
            }
            return nil
        }
        // asctime: "Sun Nov  6 08:49:37 1994"
        let parts = trimmed.split(separator: " ")
        guard parts.count == 5, parts[0].count == 3, parts[4].count == 4 else { return nil }
        return build(day: parts[2], month: parts[1], year: parts[4], time: parts[3])
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    private static func build(day: Substring, month: Substring, year: Substring, time: Substring) -> Int? {
        guard let d = digits(day), let y = digits(year), let monthIndex = months.firstIndex(of: String(month)) else {
            return nil
        }
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }),
              let hh = digits(clock[0]), let mm = digits(clock[1]), let ss = digits(clock[2]),
              hh < 24, mm < 60, ss < 61, d >= 1, d <= daysIn(month: monthIndex + 1, year: y) else { return nil }
        return daysFromCivil(year: y, month: monthIndex + 1, day: d) * 86_400 + hh * 3600 + mm * 60 + ss
    }

    private static func digits(_ s: Substring) -> Int? {
        guard !s.isEmpty, s.count <= 4, s.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(s)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 in the proleptic Gregorian calendar (era-based, valid for all years ≥ 0).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let shiftedMonth = month > 2 ? month - 3 : month + 9
        let dayOfYear = (153 * shiftedMonth + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

public enum RetryAfter {
    /// Longest wait we represent; anything larger is clamped (a caller's budget will refuse it anyway).
    public static let maximumSeconds = 86_400 * 365

    /// Retry-After value as seconds from `nowUnixTime`: delta-seconds as given, an HTTP-date as the
    /// distance to it (0 when already past). Nil for anything else (negative, fractional, garbage).
    public static func seconds(from value: String, nowUnixTime: Double) -> Int? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return nil }
        if trimmed.allSatisfy({ $0.isASCII && $0.isNumber }) {
            // Long digit strings overflow Int; they mean "a very long time", not "malformed".
            guard trimmed.count <= 12, let n = Int(trimmed) else { return maximumSeconds }
            return min(n, maximumSeconds)
        }
        guard let date = HTTPDate.parse(trimmed) else { return nil }
        let delta = Double(date) - nowUnixTime
        return delta <= 0 ? 0 : min(Int(delta.rounded(.up)), maximumSeconds)
    }
}
