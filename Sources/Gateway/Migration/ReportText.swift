import Foundation

/// The report as text: the terminal's verdict lines (`iapgw compare`) and the number and date
/// formats the page, the CSV and the terminal share.
extension MigrationReport {
    /// The verdict, its unmet criteria and the cutover impact as lines for a terminal (`iapgw compare`),
    /// over every stored comparison of the app (not only this run's).
    public var verdictText: String {
        var lines = ["verdict (\(criteria.primaryEnvironment), over distinct purchase chains): \(verdict.label)"]
        if case .notReady(let reasons) = verdict { lines += reasons.map { "  - \($0)" } }
        for e in environments where e.environment != criteria.primaryEnvironment {
            lines.append("  \(e.environment), judged apart: \(e.isReady ? "ready" : "not ready") (\(e.chains) purchase chain(s))")
        }
        if refusedByBoth > 0 { lines.append("  refused by both paths (junk, not counted): \(refusedByBoth) comparison(s)") }
        let counts = Dictionary(grouping: impact, by: \.change).mapValues(\.count)
        lines.append("if you cut over now: \(counts[.losesAccess] ?? 0) purchase(s) would lose access, "
                     + "\(counts[.gainsAccess] ?? 0) would gain access, \(counts[.differentExpiry] ?? 0) would see another expiry")
        for row in impact {
            lines.append("  \(row.change.rawValue): account \(row.account ?? "(unknown)"), \(row.productId), "
                         + "\(row.legacyText) -> \(row.serverAPIText)")
        }
        return lines.joined(separator: "\n")
    }

    /// "99.5%" style, one decimal, without Foundation's locale.
    static func percent(_ rate: Double) -> String {
        let tenths = Int((rate * 1000).rounded())
        return "\(tenths / 10).\(tenths % 10)%"
    }

    /// Milliseconds as days with one decimal ("6.9").
    static func days(_ millis: Int64) -> String {
        let tenths = Int((Double(millis) / 8_640_000).rounded(.down))
        return "\(tenths / 10).\(tenths % 10)"
    }

    static func day(_ millis: Int64) -> String {
        String(isoDate(millis).prefix(10))
    }

    /// UTC ISO-8601 with milliseconds ("2026-03-21T10:00:00.000Z").
    static func isoDate(_ millis: Int64) -> String {
        let date = Date(timeIntervalSince1970: TimeInterval(millis) / 1000)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        func two(_ n: Int?) -> String { let n = n ?? 0; return n < 10 ? "0\(n)" : "\(n)" }
        let ms = Int(((millis % 1000) + 1000) % 1000)
        let msText = ms < 10 ? "00\(ms)" : ms < 100 ? "0\(ms)" : "\(ms)"
        return "\(c.year ?? 1970)-\(two(c.month))-\(two(c.day))T\(two(c.hour)):\(two(c.minute)):\(two(c.second)).\(msText)Z"
    }
}
